"""orbax round trip of a stacked run state; clear errors for missing or corrupt checkpoints."""

import os

import chex
import pytest

from compgen_jax import checkpointing
from compgen_jax.scaling import runs
from compgen_jax.scaling import train as scaling_train
from compgen_jax.types import CheckpointError
from tests.helpers import load_config


@pytest.fixture(scope="module")
def state_and_cfg():
  cfg = load_config("hyperteacher", "tiny")
  grid = runs.run_grid(cfg)
  runs.precompute_splits(cfg, grid)
  keys, hparams = runs.run_inputs(cfg, grid)
  return scaling_train.make_init(cfg)(keys, hparams), cfg, grid


def test_round_trip(state_and_cfg, tmp_path):
  state, cfg, grid = state_and_cfg
  mngr = checkpointing.manager(str(tmp_path / "ckpt"))
  checkpointing.save(mngr, 7, state)
  step, restored = checkpointing.restore(str(tmp_path / "ckpt"),
                                         scaling_train.abstract_state(cfg, grid))
  assert step == 7
  chex.assert_trees_all_equal(restored, state)
  assert type(restored) is type(state)


def test_missing_checkpoint(state_and_cfg, tmp_path):
  _, cfg, grid = state_and_cfg
  with pytest.raises(CheckpointError, match="no checkpoint"):
    checkpointing.restore(str(tmp_path / "nothing"), scaling_train.abstract_state(cfg, grid))
  mngr = checkpointing.manager(str(tmp_path / "ckpt"))
  checkpointing.save(mngr, 1, state_and_cfg[0])
  with pytest.raises(CheckpointError, match="step 5"):
    checkpointing.restore(str(tmp_path / "ckpt"), scaling_train.abstract_state(cfg, grid), step=5)


def test_corrupt_checkpoint(state_and_cfg, tmp_path):
  state, cfg, grid = state_and_cfg
  mngr = checkpointing.manager(str(tmp_path / "ckpt"))
  checkpointing.save(mngr, 3, state)
  for root, _, files in os.walk(tmp_path / "ckpt" / "3"):
    for name in files:
      with open(os.path.join(root, name), "wb") as f:
        f.write(b"garbage")
  with pytest.raises(CheckpointError, match="could not be restored"):
    checkpointing.restore(str(tmp_path / "ckpt"), scaling_train.abstract_state(cfg, grid))


def test_incompatible_config(state_and_cfg, tmp_path, monkeypatch):
  state, _, _ = state_and_cfg
  mngr = checkpointing.manager(str(tmp_path / "ckpt"))
  checkpointing.save(mngr, 3, state)
  wider = load_config("hyperteacher", "tiny", **{"student.mlp.width": 96})
  abstract = scaling_train.abstract_state(wider, runs.run_grid(wider))
  # refused from the stored metadata, before orbax starts reads that would fail in its threads
  restores = []
  monkeypatch.setattr(checkpointing.ocp.CheckpointManager, "restore",
                      lambda *a, **k: restores.append(a))
  with pytest.raises(CheckpointError, match=r"does not match the config's state shapes \(.*"
                     r"stored \(\d+, \d+, 64\), config \(\d+, \d+, 96\)"):
    checkpointing.restore(str(tmp_path / "ckpt"), abstract)
  assert restores == []
  # the same check accepts the config that wrote it
  _, cfg, grid = state_and_cfg
  checkpointing._check_stored_shapes(str(tmp_path / "ckpt"), 3,
                                     scaling_train.abstract_state(cfg, grid))



def test_corrupt_latest_checkpoint_names_the_intact_earlier_one(state_and_cfg, tmp_path):
  state, cfg, grid = state_and_cfg
  mngr = checkpointing.manager(str(tmp_path / "ckpt"))
  for step in (2, 4, 6):
    checkpointing.save(mngr, step, state)
  for root, _, files in os.walk(tmp_path / "ckpt" / "6"):
    for name in files:
      with open(os.path.join(root, name), "wb") as f:
        f.write(b"garbage")
  with pytest.raises(CheckpointError, match=r"Step 4 is intact.*\[6\].*--step=4"):
    checkpointing.restore(str(tmp_path / "ckpt"), scaling_train.abstract_state(cfg, grid))
