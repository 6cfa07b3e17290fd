"""Config validation, the binary's error path, and a tiny letter experiment end to end."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from compgen_jax import checkpointing, workdir
from compgen_jax.composition import runner, suite
from compgen_jax.types import ConfigError
from tests.helpers import REPO, load_config

jax.config.update("jax_numpy_rank_promotion", "raise")

def _cfg(**overrides):
  return load_config("letters", "tiny", **overrides)


@pytest.mark.parametrize("overrides,field", [
    ({"experiments": "substitution,bogus"}, "experiments"),
    ({"compose.pairs": "A>B,C>7"}, "compose.pairs"),
    ({"compose.lambdas": "1,1,1"}, "compose.lambdas"),
    ({"compose.k_experts": "A>B,B>C", "compose.k_max": 2}, "compose.k_experts"),
    ({"compose.k_max": 9}, "compose.k_max"),
    ({"data.layout": "zigzag"}, "data.layout"),
    ({"model.positions": "learned", "model.max_len": 16}, "data.length_max"),
    ({"finetune.regimes": "head,top7"}, "finetune.regimes"),
    ({"train.chunk_steps": 7}, "train.chunk_steps"),
])
def test_bad_config_is_refused_naming_the_field(overrides, field):
  with pytest.raises(ConfigError) as e:
    suite.validate(_cfg(**overrides))
  assert e.value.field == field


def test_unknown_preset_and_binary_exit_code(tmp_path):
  with pytest.raises(ValueError, match="preset"):
    load_config("letters", "huge")
  proc = subprocess.run(
      [sys.executable, os.path.join(REPO, "experiments", "compose.py"),
       "--config=" + os.path.join(REPO, "configs", "letters.py") + ":tiny",
       "--config.compose.pairs=A>B,C>%", f"--workdir={tmp_path}"],
      capture_output=True, text=True, cwd=REPO, timeout=120)
  assert proc.returncode != 0
  assert "compose.pairs" in proc.stderr and "ABCDEFGHIJKLMNOPQRSTUVWXYZ" in proc.stderr
  assert not os.listdir(tmp_path)  # refused before anything was written


def test_tiny_letter_experiment_composes_and_restores(tmp_path):
  cfg = _cfg(num_seeds=1, experiments="substitution")
  wd = str(tmp_path / "run")
  rows = runner.run(cfg, wd)["substitution"]
  assert len(rows) == 1 and rows[0]["exact_match"] >= 0.95, rows
  assert rows[0]["overlap"] == 0.0 and rows[0]["mean_abs_log_z"] < 0.1
  with open(os.path.join(wd, "substitution", "results.jsonl")) as f:
    assert json.loads(f.readline())["pair"] == "A>B,C>D"
  assert os.path.exists(os.path.join(wd, "substitution", "plot.png"))
  assert checkpointing.available_steps(os.path.join(wd, "checkpoints", "scratch")) == [1]
  # a rerun restores the same models instead of training again
  zoo = suite.build_zoo(cfg, wd)
  assert set(zoo.params) == {"identity", "A>B", "C>D"}
  rows2 = runner.run(cfg, wd)["substitution"]
  np.testing.assert_allclose(rows2[0]["exact_match"], rows[0]["exact_match"])
  with pytest.raises(ConfigError, match="different config"):
    workdir.prepare(wd, _cfg(num_seeds=2, experiments="substitution"))
