"""SIGKILL to experiments/sweep.py alone (not its process group) mid-program: its train.py dies
with it, and re-running the sweep at once resumes the program to exactly the rows of an
uninterrupted sweep (no second writer, no duplicated rows)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from compgen_jax import checkpointing, metric_writer
from compgen_jax import workdir as workdir_lib
from tests.helpers import REPO

pytestmark = pytest.mark.heavy  # collected first (tests/conftest.py)

SWEEP_CONFIG = '''
import ml_collections


def get_config(preset):
  cfg = ml_collections.ConfigDict()
  cfg.name = "kill_" + preset
  cfg.base = "configs/hyperteacher.py:tiny"
  cfg.overrides = {"num_seeds": 1, "train": {"num_steps": 1500, "checkpoint_every": 100}}
  cfg.programs = ({"student.mlp.width": 8},)
  return cfg
'''


def _sweep(config: str, sweep_dir: str) -> list[str]:
  return [sys.executable, os.path.join(REPO, "experiments", "sweep.py"), f"--config={config}",
          f"--sweep_dir={sweep_dir}"]


def _dead(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # exited, not yet reaped
  except FileNotFoundError:
    return True


def test_killing_the_sweep_alone_then_rerunning_matches_an_uninterrupted_sweep(tmp_path):
  config = str(tmp_path / "kill_sweep.py")
  with open(config, "w") as f:
    f.write(SWEEP_CONFIG)
  clean, killed = str(tmp_path / "clean"), str(tmp_path / "killed")
  reference = subprocess.Popen(_sweep(f"{config}:a", clean), cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
  sweep = subprocess.Popen(_sweep(f"{config}:a", killed), cwd=REPO, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
  program = os.path.join(killed, "width-8")
  deadline = time.monotonic() + 240
  while not checkpointing.available_steps(os.path.join(program, workdir_lib.CHECKPOINT_DIR)):
    assert sweep.poll() is None and time.monotonic() < deadline, "no checkpoint came"
    time.sleep(0.05)
  with open(os.path.join(program, workdir_lib.LOCK_FILE)) as f:
    train_pid = int(f.read().split()[1])  # "pid P (host H: ...train.py ...)"
  os.kill(sweep.pid, signal.SIGKILL)  # the sweep alone, not its process group
  sweep.wait()
  rerun = subprocess.Popen(_sweep(f"{config}:a", killed), cwd=REPO, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)  # at once
  deadline = time.monotonic() + 2  # far less than the ~1400 steps left would take
  while not _dead(train_pid):  # its train.py dies with it rather than training on
    assert time.monotonic() < deadline, "train.py outlived the killed sweep"
    time.sleep(0.02)
  log, _ = rerun.communicate(timeout=300)
  assert rerun.returncode == 0, log[-3000:]
  assert "start  width-8" in log  # the program was unfinished: the re-run resumed it
  out, _ = reference.communicate(timeout=300)
  assert reference.returncode == 0, out[-3000:]
  rows = metric_writer.read_rows(os.path.join(program, workdir_lib.METRICS_FILE))
  want = metric_writer.read_rows(os.path.join(clean, "width-8", workdir_lib.METRICS_FILE))
  assert len(want) == 1500 // 10  # one row per log_every=10 steps, one run
  assert rows == want  # same rows, same count, same values: resumed bit for bit
  entry, = workdir_lib.read_index(killed)["programs"]
  assert entry["status"] == "done" and entry["exit_code"] == 0
