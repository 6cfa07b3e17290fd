"""Bad input to the real binaries is one line on stderr and exit status 2: a config file that does
not exist, an unknown preset, a garbage line inside metrics.jsonl, a file deleted from the latest
checkpoint, a letters model of width 0."""

import os
import shutil
import subprocess
import sys

import pytest

from compgen_jax import checkpointing
from compgen_jax import workdir as workdir_lib
from compgen_jax.scaling import runs
from compgen_jax.scaling import train as scaling_train
from compgen_jax.types import CheckpointError
from tests.helpers import REPO, load_config

_CFG = load_config("hyperteacher", "tiny", **{"num_seeds": 1, "train.num_steps": 100,
                                              "train.checkpoint_every": 50})

TRAIN_FLAGS = ("--config=configs/hyperteacher.py:tiny", "--config.num_seeds=1",
               "--config.train.num_steps=100", "--config.train.checkpoint_every=50")


def _binary(name: str, *args: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, os.path.join(REPO, "experiments", name), *args],
                        capture_output=True, text=True, cwd=REPO, timeout=300,
                        env=dict(os.environ, JAX_PLATFORMS="cpu"))


def _one_line(result: subprocess.CompletedProcess, *words: str) -> str:
  assert result.returncode == 2, result.stderr[-3000:]
  assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
  for word in words:
    assert word in result.stderr, (word, result.stderr)
  return result.stderr


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """A finished tiny run (checkpoints at steps 50 and 100), as train.py writes it."""
  path = str(tmp_path_factory.mktemp("trained") / "wd")
  scaling_train.train_and_evaluate(_CFG, path)
  return path


def test_a_config_file_that_does_not_exist(tmp_path):
  for form in (("--config=nope/missing.py:tiny",), ("--config", "nope/missing.py:tiny")):
    _one_line(_binary("train.py", *form, f"--workdir={tmp_path / 'w'}"), "'nope/missing.py'")
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize("config", [
    "configs/hyperteacher.py", "configs/images.py", "configs/letters.py", "configs/theorem.py",
    "configs/llm.py"])
def test_an_unknown_preset(config, tmp_path):
  _one_line(_binary("train.py", f"--config={config}:bogus", f"--workdir={tmp_path / 'w'}"),
            f"--config={config}:bogus", "bogus")
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize("args,words", [
    (("--config.seed=1",), ("--config.seed=1", "a scaling evaluation takes no config overrides")),
    (("--experiments=baselines",), ("--experiments", "takes no config overrides")),
    (("stray",), ("unexpected argument 'stray'",))])
def test_an_override_of_a_workdir_that_allows_none(trained, args, words):
  before = sorted(os.listdir(trained))
  _one_line(_binary("evaluate.py", f"--workdir={trained}", *args), *words)
  assert sorted(os.listdir(trained)) == before


def test_a_garbage_line_inside_metrics_jsonl(trained, tmp_path):
  workdir = shutil.copytree(trained, tmp_path / "w")
  path = os.path.join(workdir, workdir_lib.METRICS_FILE)
  lines = open(path).read().splitlines(keepends=True)
  with open(path, "w") as f:
    f.writelines(lines[:3] + ["garbage\n"] + lines[3:])
  _one_line(_binary("train.py", *TRAIN_FLAGS, f"--workdir={workdir}"), "metrics.jsonl",
            "line 4 is not JSON")


@pytest.mark.parametrize("binary", ["train.py", "evaluate.py"])
def test_a_file_deleted_from_the_latest_checkpoint(binary, trained, tmp_path):
  workdir = shutil.copytree(trained, tmp_path / "w")
  step_dir = os.path.join(workdir, workdir_lib.CHECKPOINT_DIR, "100")
  data = os.path.join(step_dir, "default", "ocdbt.process_0", "d")
  for name in os.listdir(data):
    os.remove(os.path.join(data, name))
  flags = TRAIN_FLAGS if binary == "train.py" else ()
  stderr = _one_line(_binary(binary, *flags, f"--workdir={workdir}"), "step 100",
                     os.path.join(workdir, workdir_lib.CHECKPOINT_DIR), "(missing)",
                     "Step 50 is intact")
  assert "Exception ignored" not in stderr


def test_a_truncated_file_is_named_before_orbax_reads_it(trained, tmp_path):
  workdir = str(shutil.copytree(trained, tmp_path / "w"))
  manifest = os.path.join(workdir, workdir_lib.CHECKPOINT_DIR, "100", "default", "manifest.ocdbt")
  with open(manifest, "r+b") as f:
    f.truncate(os.path.getsize(manifest) // 2)
  abstract = scaling_train.abstract_state(_CFG, runs.run_grid(_CFG))
  with pytest.raises(CheckpointError, match=r"step 100 .*default/manifest.ocdbt \(\d+ bytes"):
    checkpointing.restore(os.path.join(workdir, workdir_lib.CHECKPOINT_DIR), abstract)


def test_letters_width_zero_names_model_width(tmp_path):
  stderr = _one_line(_binary("train.py", "--config=configs/letters.py:tiny",
                             "--config.model.width=0", f"--workdir={tmp_path / 'w'}"),
                     "model.width")
  assert "num_heads" not in stderr
  assert not os.listdir(tmp_path)
