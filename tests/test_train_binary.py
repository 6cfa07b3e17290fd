"""Smoke tests of experiments/train.py as a user runs it."""

import json
import os
import subprocess
import sys

import pytest

from compgen_jax.scaling import config as training_config
from compgen_jax.scaling import evaluators
from tests.helpers import REPO, load_config


def _train(*args):
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  return subprocess.run([sys.executable, os.path.join(REPO, "experiments", "train.py"), *args],
                        capture_output=True, text=True, cwd=REPO, env=env, timeout=600)


def test_train_binary_runs_and_resumes(tmp_path):
  workdir = str(tmp_path / "run")
  args = ["--config=configs/hyperteacher.py:tiny", f"--workdir={workdir}",
          "--config.train.num_steps=100", "--config.num_seeds=1"]
  result = _train(*args)
  assert result.returncode == 0, result.stderr[-2000:]
  assert "ood/r2" in result.stdout and "metrics.jsonl" in result.stdout
  with open(os.path.join(workdir, "config.json")) as f:
    assert json.load(f)["train"]["num_steps"] == 100
  assert os.path.isdir(os.path.join(workdir, "checkpoints", "100"))
  again = _train(*args)  # a finished workdir: restores and reprints, trains nothing
  assert again.returncode == 0, again.stderr[-2000:]
  assert again.stdout == result.stdout


def test_train_binary_rejects_bad_value_before_writing(tmp_path):
  workdir = str(tmp_path / "bad")
  result = _train("--config=configs/hyperteacher.py:tiny", f"--workdir={workdir}",
                  "--config.task.support=bogus")
  assert result.returncode != 0
  assert "task.support" in result.stderr and "random" in result.stderr
  assert not os.path.exists(workdir)


def test_unknown_override_key_is_one_line_naming_key_and_section(tmp_path):
  workdir = str(tmp_path / "bad")
  result = _train("--config=configs/hyperteacher.py:tiny", f"--workdir={workdir}",
                  "--config.task.nonexistent=1")
  assert result.returncode == 2
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
  assert "nonexistent" in lines[0] and "config.task" in lines[0] and "num_modules" in lines[0]
  assert not os.path.exists(workdir)


@pytest.mark.parametrize("override, field", [
    ("--config.evals.id.every=70", "evals.id.every"),  # tiny: train.chunk_size 50
    ("--config.evals={'id': {}, 'ood_hotness': {'hotness_above': -1}}",
     "evals.ood_hotness.hotness_above"),
])
def test_bad_evals_entry_is_one_line_naming_the_field_and_writes_nothing(tmp_path, override,
                                                                        field):
  workdir = str(tmp_path / "bad")
  result = _train("--config=configs/hyperteacher.py:tiny", f"--workdir={workdir}", override)
  assert result.returncode == 2, result.stderr[-2000:]
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
  assert field in lines[0]
  assert not os.path.exists(workdir)


def test_compilation_cache_flag_fills_the_cache(tmp_path):
  """--compilation_cache keeps every compiled program (the init program has no host callback,
  so it is cacheable too): a second process starts without compiling."""
  cache = tmp_path / "cache"
  result = subprocess.run(
      [sys.executable, os.path.join(REPO, "experiments", "train.py"),
       "--config=configs/hyperteacher.py:tiny", f"--workdir={tmp_path / 'run'}",
       f"--compilation_cache={cache}", "--config.train.num_steps=50",
       "--config.evals.id.every=50", "--config.evals.ood.every=50",
       "--config.train.checkpoint_every=50",
       "--config.num_seeds=1"],
      capture_output=True, text=True, cwd=REPO, env=dict(os.environ, JAX_PLATFORMS="cpu"),
      timeout=600)
  assert result.returncode == 0, result.stderr[-2000:]
  entries = os.listdir(cache)
  # init, the training chunk and the two evaluators at least.
  assert len(entries) >= 4, entries


def test_print_config_prints_the_resolved_tree_and_writes_nothing(tmp_path):
  workdir = str(tmp_path / "never")
  result = _train("--config=configs/hyperteacher.py:paper", f"--workdir={workdir}",
                  "--config.evals.ood.every=100", "--print_config")
  assert result.returncode == 0, result.stderr[-2000:]
  tree = json.loads(result.stdout)
  assert not os.path.exists(workdir)
  assert tree["evals"]["ood"] == {"every": 100, "num_tasks": 1024}  # the override is there
  assert tree["train"]["num_steps"] == 100_000 and tree["student"]["name"] == "mlp"
  assert set(tree) == {"app", "seed", "num_seeds", "task", "encoding", "student", "optim", "train",
                       "evals", "sweep", "probe"}
  evaluate = subprocess.run(
      [sys.executable, os.path.join(REPO, "experiments", "evaluate.py"), f"--workdir={workdir}",
       "--print_config"], capture_output=True, text=True, cwd=REPO, timeout=300)
  assert evaluate.returncode == 2 and "print_config" in evaluate.stderr
  assert len(evaluate.stderr.strip().splitlines()) == 1


def test_print_config_needs_no_workdir():
  # --print_config writes nothing, so only the config is required; a run still needs --workdir
  shown = subprocess.run(
      [sys.executable, os.path.join(REPO, "experiments", "train.py"),
       "--config=configs/llm.py:tiny", "--print_config"], capture_output=True, text=True,
      cwd=REPO, timeout=300)
  assert shown.returncode == 0, shown.stderr[-2000:]
  assert "benchmarks" in json.loads(shown.stdout)
  refused = _train("--config=configs/hyperteacher.py:tiny")
  assert refused.returncode != 0 and "--workdir must have a value" in refused.stderr


def test_resolved_fills_in_what_a_run_reads():
  cfg = load_config("preference", "tiny")
  with cfg.unlocked():
    cfg.evals.id = {"every": 50}
  out = training_config.resolved(cfg)
  assert dict(out.evals.id) == {"every": 50, "num_tasks": evaluators.COMMON["num_tasks"]}
  assert tuple(out.probe.targets) == ("z",)  # the preference family has no teacher weights
  assert "num_tasks" not in cfg.evals.id  # the config itself is left as it was
