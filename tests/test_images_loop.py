"""Image runs through the one loop (training.loop.run): SIGKILLed mid-run and re-run, they end
with the rows and parameters of an uninterrupted run; sharded over 4 forced host devices they
write the rows of one device (each device count is a subprocess: it is fixed when JAX starts)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from tests.helpers import REPO, finish, kill_at_first_checkpoint

pytestmark = pytest.mark.heavy  # collected first (tests/conftest.py)

# 3 seeds x 2 coverages = 6 runs: padded to 8 on 4 devices (copies of run 5)
OVERRIDES = ["--config.num_seeds=3", "--config.train.num_steps=200",
             "--config.train.checkpoint_every=50"]


def _train(workdir: str, devices: int = 1, **popen) -> subprocess.Popen:
  flags = (os.environ.get("XLA_FLAGS", "")
           + f" --xla_force_host_platform_device_count={devices}").strip()
  return subprocess.Popen(
      [sys.executable, os.path.join(REPO, "experiments", "train.py"),
       "--config=configs/images.py:tiny", f"--workdir={workdir}", *OVERRIDES],
      cwd=REPO, env=dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=flags), **popen)


def _rows(workdir: str) -> list[dict]:
  return metric_writer.read_rows(os.path.join(workdir, workdir_lib.METRICS_FILE))


def _params(workdir: str) -> dict:
  script = ("import json, sys, numpy as np, jax\n"
            "from compgen_jax.images import train\nfrom tests.helpers import load_config\n"
            "cfg = load_config('images', 'tiny', **{'num_seeds': 3, 'train.num_steps': 200,"
            " 'train.checkpoint_every': 50})\n"
            "step, state = train.restore(cfg, sys.argv[1])\n"
            "print(json.dumps([step, [np.asarray(a).tolist() for a in "
            "jax.tree.leaves(state.ema)][:2]]))")
  out = subprocess.run([sys.executable, "-c", script, workdir], cwd=REPO, capture_output=True,
                       text=True, check=True, env=dict(os.environ, JAX_PLATFORMS="cpu")).stdout
  return json.loads(out.strip().splitlines()[-1])


def test_sigkilled_or_four_device_image_runs_write_the_rows_of_one_uninterrupted_run(tmp_path):
  # one test, so the uninterrupted reference trains once for both comparisons
  clean, killed, four = (str(tmp_path / n) for n in ("clean", "killed", "four"))
  reference = _train(clean, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
  proc = _train(killed, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  kill_at_first_checkpoint(proc, os.path.join(killed, workdir_lib.CHECKPOINT_DIR), 200)
  finish(reference)
  finish(_train(killed, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
  ref = _rows(clean)
  assert _rows(killed) == ref
  assert _params(killed) == _params(clean)

  finish(_train(four, devices=4, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
  rows = _rows(four)
  assert {r["run"] for r in ref} == set(range(6))  # the padding runs write no rows
  assert [(r["step"], r["run"]) for r in rows] == [(r["step"], r["run"]) for r in ref]
  for row, want in zip(rows, ref, strict=True):
    assert row.keys() == want.keys()
    for k, v in want.items():  # a device's batch of runs is another XLA loop: float32 rounding
      if isinstance(v, float):
        np.testing.assert_allclose(row[k], v, rtol=1e-4, atol=1e-5, err_msg=f"{k} {want}")
      else:
        assert row[k] == v, (k, want)
  # the checkpoint holds the 6 real runs only, so it restores on one device
  assert _params(four)[0] == 200
