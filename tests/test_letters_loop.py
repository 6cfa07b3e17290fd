"""Letter runs through the one loop (training.loop.run, a phase per loop workdir): SIGKILLed in
the middle of the scratch phase and re-run, they end with the rows and results of an
uninterrupted run; over 4 forced host devices they write the rows of one device (each device
count is a subprocess: it is fixed when JAX starts)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.letters import runner, training
from tests.helpers import REPO, finish, kill_at_first_checkpoint

pytestmark = pytest.mark.heavy  # collected first (tests/conftest.py)

# tiny: 3 tasks x 2 seeds = 6 runs (padded to 8 on 4 devices); a checkpoint every 50 steps
OVERRIDES = ["--config.experiments=('substitution',)", "--config.train.num_steps=200",
             "--config.train.chunk_size=50"]


def _train(workdir: str, devices: int = 1) -> subprocess.Popen:
  flags = (os.environ.get("XLA_FLAGS", "")
           + f" --xla_force_host_platform_device_count={devices}").strip()
  return subprocess.Popen(
      [sys.executable, os.path.join(REPO, "experiments", "train.py"),
       "--config=configs/letters.py:tiny", f"--workdir={workdir}", *OVERRIDES], cwd=REPO,
      env=dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=flags, PYTHONPATH=REPO),
      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _rows(workdir: str, name: str = "") -> list[dict]:
  path = (os.path.join(workdir, name, runner.RESULTS_FILE) if name else
          os.path.join(workdir, training.SCRATCH, workdir_lib.METRICS_FILE))
  return metric_writer.read_rows(path)


def test_sigkilled_or_four_device_letter_runs_write_the_rows_of_one_uninterrupted_run(tmp_path):
  # one test, so the uninterrupted reference trains once for both comparisons
  clean, killed, four = (str(tmp_path / n) for n in ("clean", "killed", "four"))
  reference = _train(clean)
  proc = _train(killed)
  kill_at_first_checkpoint(
      proc, os.path.join(killed, training.SCRATCH, workdir_lib.CHECKPOINT_DIR), 200)
  finish(reference)
  finish(_train(killed))
  ref = _rows(clean)
  assert _rows(killed) == ref
  assert [r["step"] for r in ref][::6] == list(range(50, 201, 50))  # 6 runs a chunk
  # the models the experiments read are the same: so are their results
  assert _rows(killed, "substitution") == _rows(clean, "substitution")

  finish(_train(four, devices=4))
  rows = _rows(four)
  assert {(r["task"], r["seed"]) for r in ref} == {
      (t, s) for t in ("identity", "A>B", "C>D") for s in (0, 1)}  # no padding runs' rows
  assert [(r["step"], r["task"], r["seed"]) for r in rows] == [
      (r["step"], r["task"], r["seed"]) for r in ref]
  for row, want in zip(rows, ref, strict=True):  # another XLA loop per device: rounding
    np.testing.assert_allclose(row["train/loss"], want["train/loss"], rtol=1e-4, atol=1e-5)
  em = lambda wd: [r["exact_match"] for r in _rows(wd, "substitution")]
  np.testing.assert_allclose(em(four), em(clean), atol=1e-6)
