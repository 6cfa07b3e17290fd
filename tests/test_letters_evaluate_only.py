"""experiments/evaluate.py over a trained tiny letters workdir: the same result rows bit for bit,
no training artifact touched, evaluation overrides applied, and everything it cannot do without
training refused in one line (exit 2) with nothing written."""

import hashlib
import os
import shutil
import subprocess
import sys

import jax
import pytest

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.letters import config as letters_config
from compgen_jax.letters import registry, runner, standalone
from compgen_jax.types import ConfigError, NonFiniteError
from tests.helpers import REPO, load_config

jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("letters") / "wd")
  runner.run(load_config("letters", "tiny", num_seeds=1, experiments=("substitution",)), path)
  return path


def _digests(path: str) -> dict:
  out = {}
  for root, _, files in os.walk(path):
    for name in files:
      with open(os.path.join(root, name), "rb") as f:
        out[os.path.relpath(os.path.join(root, name), path)] = hashlib.sha256(f.read()).hexdigest()
  return out


def _evaluate(*args: str) -> subprocess.CompletedProcess:
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": REPO}
  return subprocess.run([sys.executable, os.path.join(REPO, "experiments", "evaluate.py"), *args],
                        capture_output=True, text=True, env=env, cwd=REPO, timeout=300)


def test_binary_reproduces_the_results_and_touches_nothing_else(workdir):
  before = _digests(workdir)
  done = _evaluate(f"--workdir={workdir}")
  assert done.returncode == 0, done.stderr[-2000:]
  assert "restored trained models" in done.stdout and "training" not in done.stdout
  # same rows bit for bit (the file's bytes), no new checkpoint step, no new metrics rows
  assert _digests(workdir) == before


def test_an_evaluation_override_changes_only_the_experiments_results(workdir, tmp_path):
  path = str(shutil.copytree(workdir, tmp_path / "wd"))
  before = _digests(path)
  done = _evaluate(f"--workdir={path}", "--experiments=substitution",
                   "--config.compose.lambdas=(0.5,0.5)")
  assert done.returncode == 0, done.stderr[-2000:]
  after = _digests(path)
  assert {k for k in after if after[k] != before.get(k)} == {"substitution/results.jsonl",
                                                             "substitution/plot.png"}
  assert after[workdir_lib.CONFIG_FILE] == before[workdir_lib.CONFIG_FILE]  # as trained


@pytest.mark.parametrize("args,words", [
    (("--experiments=substitution,baselines",), ("'baselines' needs A>B+C>D", "new --workdir")),
    # overrides of the saved config: its experiments may differ, its model not
    (("--config.experiments=('substitution',)", "--config.model.width=32"),
     ("config field 'model.width'", "32")),
    (("--config.model.nope=1",), ("unknown field 'nope' in config.model", "width")),
])
def test_what_needs_training_is_refused_in_one_line(workdir, args, words):
  before = _digests(workdir)
  done = _evaluate(f"--workdir={workdir}", *args)
  assert done.returncode == 2, done.stderr[-2000:]
  assert len(done.stderr.strip().splitlines()) == 1, done.stderr
  assert all(w in done.stderr for w in words), done.stderr
  assert _digests(workdir) == before


@pytest.mark.parametrize("damage,words", [
    ("no_workdir", "does not exist"), ("no_config", "config.json"),
    ("no_checkpoint", "no checkpoint found")])
def test_an_unusable_workdir_is_refused_in_one_line(workdir, tmp_path, damage, words):
  path = str(tmp_path / "wd")
  if damage == "no_config":
    os.makedirs(path)
  elif damage == "no_checkpoint":
    shutil.copytree(workdir, path)
    shutil.rmtree(os.path.join(path, "scratch", "checkpoints"))
  before = _digests(path) if os.path.exists(path) else None
  done = _evaluate(f"--workdir={path}", "--config.compose.kl_threshold=0.2")
  assert done.returncode == 2, done.stderr[-2000:]
  assert len(done.stderr.strip().splitlines()) == 1 and words in done.stderr, done.stderr
  assert (_digests(path) if os.path.exists(path) else None) == before


def test_a_failing_pass_keeps_the_earlier_results(workdir, tmp_path, monkeypatch):
  path = str(tmp_path / "wd")
  shutil.copytree(workdir, path)
  results = os.path.join(path, "substitution", runner.RESULTS_FILE)
  before = _digests(path)
  cfg = standalone.saved_config(path).copy_and_resolve_references()
  cfg.compose.lambdas = (0.5, 0.5)  # an evaluation setting: the pass computes other numbers

  def boom(ctx):
    del ctx
    raise NonFiniteError("boom")

  boom_exp = registry.EXPERIMENTS["substitution"]._replace(run=boom)
  monkeypatch.setitem(registry.EXPERIMENTS, "boom", boom_exp)
  with pytest.raises(NonFiniteError):
    standalone.evaluate(cfg, path, ["substitution", "boom"])
  assert _digests(path) == before
  rows = standalone.evaluate(cfg, path, ["substitution"])["substitution"]
  after = _digests(path)
  assert {k for k in after if after[k] != before.get(k)} <= {"substitution/results.jsonl",
                                                               "substitution/plot.png"}
  assert after["substitution/results.jsonl"] != before["substitution/results.jsonl"]
  assert len(metric_writer.read_rows(results)) == len(rows)


def test_which_overrides_and_models_an_evaluation_pass_accepts():
  saved = load_config("letters", "tiny", experiments=("k_experts",))
  ok = load_config("letters", "tiny", experiments=("k_experts", "substitution"), **{
      "compose.k_max": 2, "compose.kl_threshold": 0.3, "data.length_max": 6,
      "train.progress": True})
  workdir_lib.check_unchanged(saved, ok, letters_config.EVALUATION_FIELDS, "an evaluation")
  standalone.check_trained(saved, ok, "W")
  for field, value in [("optim.learning_rate", 0.1), ("data.train_len", 5), ("seed", 1),
                       ("finetune.train.num_steps", 25), ("init", "independent")]:
    with pytest.raises(ConfigError) as e:
      workdir_lib.check_unchanged(saved, load_config("letters", "tiny", **{field: value}),
                                  letters_config.EVALUATION_FIELDS, "an evaluation")
    assert e.value.field == field
  fewer = load_config("letters", "tiny", experiments=("k_experts",), **{"compose.k_max": 2})
  with pytest.raises(ConfigError, match="'k_experts' needs E>F") as e:
    standalone.check_trained(fewer, saved, "W")
  with pytest.raises(ConfigError, match=r"'arithmetic' needs A>B fine-tuned \(head\)"):
    standalone.check_trained(saved, load_config("letters", "tiny"), "W")
