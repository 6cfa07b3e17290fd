"""Standalone evaluation and probes over a trained tiny workdir: same numbers as in training, no
training artifact touched, every binary runs, and every bad input is a clear error."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.scaling import passes
from compgen_jax.scaling import train as scaling_train
from compgen_jax.types import CheckpointError, ConfigError
from tests.helpers import REPO, load_config

STEPS = (50, 100)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("tiny") / "wd")
  cfg = load_config("hyperteacher", "tiny", **{
      "train.num_steps": 100, "evals.id.every": 50, "evals.ood.every": 50,
      "train.checkpoint_every": 50, "probe.num_tasks": 128})
  scaling_train.train_and_evaluate(cfg, path)
  return path


def _digests(path: str) -> dict:
  out = {}
  for root, _, files in os.walk(path):
    for name in files:
      full = os.path.join(root, name)
      with open(full, "rb") as f:
        out[os.path.relpath(full, path)] = hashlib.sha256(f.read()).hexdigest()
  return out


def test_standalone_reproduces_in_training_numbers_and_touches_nothing(workdir):
  before = _digests(workdir)
  rows = passes.evaluate_workdir(workdir, every=True)
  trained = {(r["step"], r["run"]): r for r in metric_writer.read_rows(
      os.path.join(workdir, workdir_lib.METRICS_FILE)) if "ood/r2" in r}
  assert sorted({r["step"] for r in rows}) == list(STEPS)
  for row in rows:
    ref = trained[(row["step"], row["run"])]
    for key in ("id/r2", "id/loss", "ood/r2", "ood/loss"):
      assert row[key] == ref[key], (key, row["step"], row["run"])
    assert "ood_h3/r2" in row and "ood/r2_q50" in row
  after = _digests(workdir)
  new = set(after) - set(before)
  assert new == {workdir_lib.EVAL_FILE}  # the curve is the binary's (test below)
  assert {k: after[k] for k in before} == before


def test_probe_rows_per_run_and_lambda(workdir):
  rows = passes.probe_workdir(workdir, step=50)
  assert [(r["step"], r["run"]) for r in rows] == [(50, 0), (50, 1)]
  assert rows[0]["z/input/id_r2"] > 0.95  # identity encoding: phi(z) = z
  for layer in ("dense_0", "dense_1", "readout"):
    assert f"z/{layer}/ood_r2" in rows[0] and f"theta/{layer}/id_r2" in rows[0]


def _run(binary: str, *args: str) -> subprocess.CompletedProcess:
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": REPO}
  return subprocess.run([sys.executable, os.path.join(REPO, "experiments", binary), *args],
                        capture_output=True, text=True, env=env, cwd=REPO, timeout=600)


def test_binaries_end_to_end(workdir, tmp_path):
  done = _run("evaluate.py", f"--workdir={workdir}", "--every", "--evaluators=id,ood")
  assert done.returncode == 0, done.stderr[-2000:]
  assert "ood/r2" in done.stdout
  assert os.path.exists(os.path.join(workdir, workdir_lib.EVAL_CURVE_FILE))
  done = _run("probe.py", f"--workdir={workdir}")
  assert done.returncode == 0, done.stderr[-2000:]
  assert "dense_0" in done.stdout
  out = tmp_path / "report"
  done = _run("report.py", f"--workdirs={workdir}", f"--out={out}")
  assert done.returncode == 0, done.stderr[-2000:]
  assert (out / "decodability_vs_ood_r2.png").exists() and "Pearson r" in done.stdout


def test_binary_error_exits_nonzero_with_message(tmp_path):
  done = _run("evaluate.py", f"--workdir={tmp_path / 'missing'}")
  assert done.returncode == 2 and "does not exist" in done.stderr


def _copy(workdir: str, tmp_path) -> str:
  dst = str(tmp_path / "copy")
  shutil.copytree(workdir, dst)
  return dst


def test_bad_workdirs_are_clear_errors(workdir, tmp_path):
  with pytest.raises(ConfigError, match="does not exist"):
    passes.evaluate_workdir(str(tmp_path / "missing"))
  os.makedirs(tmp_path / "empty")
  with pytest.raises(ConfigError, match="no config.json"):
    passes.probe_workdir(str(tmp_path / "empty"))
  bad = _copy(workdir, tmp_path)
  with open(os.path.join(bad, "config.json"), "w") as f:
    f.write("{not json")
  with pytest.raises(ConfigError, match="not valid JSON"):
    passes.evaluate_workdir(bad)


def test_missing_steps_and_checkpoints_are_clear_errors(workdir, tmp_path):
  with pytest.raises(CheckpointError, match="available: \\[50, 100\\]"):
    passes.evaluate_workdir(workdir, step=75)
  with pytest.raises(ConfigError, match="either a step or every"):
    passes.evaluate_workdir(workdir, step=50, every=True)
  bare = _copy(workdir, tmp_path)
  shutil.rmtree(os.path.join(bare, workdir_lib.CHECKPOINT_DIR))
  with pytest.raises(CheckpointError, match="no checkpoint found"):
    passes.probe_workdir(bare)


def test_corrupt_checkpoint_is_a_clear_error(workdir, tmp_path):
  bad = _copy(workdir, tmp_path)
  for root, _, files in os.walk(os.path.join(bad, workdir_lib.CHECKPOINT_DIR, "100")):
    for name in files:
      if os.sep + "d" in root or name.endswith("ocdbt"):
        with open(os.path.join(root, name), "wb") as f:
          f.write(b"garbage")
  with pytest.raises(CheckpointError, match="step 100"):
    passes.evaluate_workdir(bad, names=("id",))


def test_checkpoint_of_an_incompatible_config_is_a_clear_error(workdir, tmp_path):
  bad = _copy(workdir, tmp_path)
  path = os.path.join(bad, "config.json")
  with open(path) as f:
    cfg = json.load(f)
  cfg["student"]["mlp"]["width"] = 32
  with open(path, "w") as f:
    json.dump(cfg, f)
  with pytest.raises(CheckpointError, match=r"does not match the config.s state shapes \(.*stored"):
    passes.evaluate_workdir(bad, names=("id",))


@pytest.mark.parametrize("drop", ["evals", "probe", "encoding.keep_zeros"])
def test_workdir_from_an_earlier_version_is_a_clear_error(workdir, tmp_path, drop):
  """A config.json without a section or field of today's schema is refused, naming it, before
  anything is compiled; the workdir is left alone."""
  old = _copy(workdir, tmp_path)
  path = os.path.join(old, "config.json")
  with open(path) as f:
    cfg = json.load(f)
  section, _, key = drop.partition(".")
  if key:
    del cfg[section][key]
  else:
    del cfg[section]
  with open(path, "w") as f:
    json.dump(cfg, f)
  before = _digests(old)
  with pytest.raises(ConfigError, match=rf"'{drop}'.*older version"):
    passes.evaluate_workdir(old, names=("id",))
  assert _digests(old) == before


def test_workdir_with_a_flat_student_section_is_a_clear_error(workdir, tmp_path):
  """The flat student layout of earlier versions (student.width, student.d_model,
  student.hyper_hidden, ...) is refused, naming the subsection fields it lacks."""
  old = _copy(workdir, tmp_path)
  path = os.path.join(old, "config.json")
  with open(path) as f:
    cfg = json.load(f)
  student = cfg["student"]
  cfg["student"] = {"name": student["name"], **student["mlp"], **student["transformer"],
                    "hyper_hidden": student["hypernetwork"]["hidden"],
                    "hyper_layernorm": student["hypernetwork"]["layernorm"]}
  with open(path, "w") as f:
    json.dump(cfg, f)
  before = _digests(old)
  with pytest.raises(ConfigError, match=r"older version; fields missing: .*student\.mlp\.width"
                     r".*student\.transformer\.d_model") as e:
    passes.evaluate_workdir(old, names=("id",))
  assert e.value.field.startswith("student.")
  assert _digests(old) == before


def test_rerunning_a_pass_replaces_its_rows(workdir, tmp_path):
  """Evaluate and probe re-run over a step: one copy of each row, equal to the first run's; the
  other steps' rows stay (the mechanism the image passes use: replace_step_rows)."""
  wd = _copy(workdir, tmp_path)
  for run, name in ((lambda **kw: passes.evaluate_workdir(wd, names=("id",), **kw),
                     workdir_lib.EVAL_FILE), (lambda **kw: passes.probe_workdir(wd, **kw),
                                         workdir_lib.PROBE_FILE)):
    path = os.path.join(wd, name)
    first = run(every=True)
    assert metric_writer.read_rows(path) == first and {r["step"] for r in first} == set(STEPS)
    again = run(step=STEPS[0])
    assert again == [r for r in first if r["step"] == STEPS[0]]
    rows = metric_writer.read_rows(path)
    assert len(rows) == len(first) and sorted(rows, key=str) == sorted(first, key=str)
