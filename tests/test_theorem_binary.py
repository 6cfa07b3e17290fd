"""Smoke test of experiments/train.py on configs/theorem.py: the tiny preset end to end in a temp
dir."""

import os
import subprocess
import sys

from compgen_jax import metric_writer
from compgen_jax.theory import experiment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(workdir, *flags):
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  return subprocess.run(
      [sys.executable, os.path.join(ROOT, "experiments", "train.py"),
       "--config=" + os.path.join(ROOT, "configs", "theorem.py") + ":tiny",
       f"--workdir={workdir}", *flags], capture_output=True, text=True, env=env, cwd=ROOT,
      timeout=600)


def test_tiny_preset_writes_table_and_plots(tmp_path):
  proc = _run(tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  for name in (experiment.TABLE_FILE, "error_vs_resolution.png", "neurons_vs_modules.png",
               "config.json", "report.md", "claims.json"):
    assert (tmp_path / name).stat().st_size > 0, name
  rows = metric_writer.read_rows(str(tmp_path / experiment.TABLE_FILE))
  kinds = {r["kind"] for r in rows}
  assert kinds == {"error", "count", "sgd", "summary"}
  summary = rows[-1]
  assert summary["bound_holds"] and summary["count_within_eps"]
  assert summary["error_slope"] < -1.5
  assert summary["constructed/ood/r2"] > 0.5


def test_bad_config_exits_nonzero_naming_the_field(tmp_path):
  proc = _run(tmp_path, "--config.theorem.eps=-1.0")
  assert proc.returncode != 0
  assert "theorem.eps" in proc.stderr
  assert not (tmp_path / experiment.TABLE_FILE).exists()
