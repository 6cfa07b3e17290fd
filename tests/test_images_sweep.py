"""Image widths through the sweep launcher (configs/sweeps/images.py): one experiments/train.py
program per width (the application read from the base config), validated before any starts,
trained, evaluated and probed by the launcher, skipped when finished, and reported from the sweep
dir by experiments/report.py."""

import json
import os
import subprocess
import sys

import pytest

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import sweep_report
from compgen_jax.images import report as images_report
from compgen_jax.sweeps import estimate, spec
from compgen_jax.types import ConfigError
from tests.helpers import REPO, run_sweep_binary, sweep_config_file

# heavy: collected first (tests/conftest.py); the group: one worker builds the module's `done`
pytestmark = [pytest.mark.heavy, pytest.mark.xdist_group("images_sweep")]

SWEEP_CONFIG = '''
import ml_collections


def get_config(preset):
  cfg = ml_collections.ConfigDict()
  cfg.name = "images"
  cfg.base = "configs/images.py:tiny"
  cfg.overrides = {"num_seeds": 1, "split": {"coverage": (0.5,)},
                   "train": {"num_steps": 50, "checkpoint_every": 50}}
  cfg.programs = ({"model.width": 16}, {"model.width": 0 if preset == "bad" else 32})
  return cfg
'''


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory):
  return sweep_config_file(tmp_path_factory, SWEEP_CONFIG, "images_sweep")


@pytest.fixture(scope="module")
def done(sweep_file, tmp_path_factory):
  sweep_dir = str(tmp_path_factory.mktemp("sweep") / "images")
  result = run_sweep_binary(f"--config={sweep_file}:ok", f"--sweep_dir={sweep_dir}",
                            "--parallel=2", "--evaluate", "--probe")
  assert result.returncode == 0, result.stdout + result.stderr[-3000:]
  return sweep_dir


def test_each_width_is_a_program_trained_evaluated_and_probed(done):
  index = workdir_lib.read_index(done)
  assert index["app"] == "images"
  entries = {e["name"]: e for e in index["programs"]}
  assert set(entries) == {"width-16", "width-32"}
  for name, width in (("width-16", 16), ("width-32", 32)):
    assert entries[name]["status"] == "done", entries[name]
    workdir = os.path.join(done, name)
    with open(os.path.join(workdir, workdir_lib.CONFIG_FILE)) as f:
      assert json.load(f)["model"]["width"] == width
    for rows_file in (workdir_lib.EVAL_FILE, workdir_lib.PROBE_FILE):
      rows = metric_writer.read_rows(os.path.join(workdir, rows_file))
      assert [(r["step"], r["run"]) for r in rows] == [(50, 0)], rows_file
    with open(os.path.join(done, spec.LOG_DIR, f"{name}.log")) as f:
      stages = [line.split(": ", 1)[1].strip() for line in f if line.startswith("### ")]
    # train.py trains, then probe.py / evaluate.py read the workdir's config.json
    assert [s.split(" ")[1] for s in stages] == ["experiments/train.py", "experiments/probe.py",
                                                 "experiments/evaluate.py"], stages
    assert all(s.endswith(f"--workdir={workdir}") for s in stages[1:]), stages


def test_a_rerun_skips_finished_programs_and_the_report_reads_them(done, sweep_file, tmp_path):
  result = run_sweep_binary(f"--config={sweep_file}:ok", f"--sweep_dir={done}", "--evaluate",
                            "--probe")
  assert result.returncode == 0 and result.stdout.count("(finished)") == 2, result.stdout
  out = subprocess.run([sys.executable, os.path.join(REPO, "experiments", "report.py"),
                        f"--sweep_dir={done}", f"--out={tmp_path}"], capture_output=True,
                       text=True, cwd=REPO, timeout=300)
  assert out.returncode == 0, out.stderr[-3000:]
  with open(tmp_path / images_report.REPORT_FILE) as f:
    assert "2 runs in 2 programs (width-16, width-32)." in f.read()
  with pytest.raises(ConfigError, match="images programs"):
    sweep_report.read_sweep(done)  # the train-sweep report refuses it instead of misreading it


def test_a_bad_width_is_refused_before_anything_is_written(sweep_file, tmp_path):
  sweep_dir = tmp_path / "bad"
  result = run_sweep_binary(f"--config={sweep_file}:bad", f"--sweep_dir={sweep_dir}")
  assert result.returncode == 2, result.stdout + result.stderr
  assert "width-0" in result.stderr and "model.width" in result.stderr, result.stderr
  assert not sweep_dir.exists()
  with pytest.raises(ConfigError, match="--estimate times the scaling experiment's programs"):
    estimate.program_configs(f"{sweep_file}:ok", str(tmp_path / "estimate"))
