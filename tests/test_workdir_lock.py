"""One writer per workdir (workdir.lock): a second writer is refused in one line naming the holder,
a waiting one gets the lock when the holder ends, and a directory that is not a workdir yet gets
nothing written before prepare makes it one (and locks it)."""

import os
import subprocess
import sys
import time

import pytest

from compgen_jax import workdir as workdir_lib
from compgen_jax.types import ConfigError
from tests.helpers import REPO, load_config

HOLD = """
import sys, time
from compgen_jax import workdir
with workdir.lock(sys.argv[1]):
  print("held", flush=True)
  time.sleep(float(sys.argv[2]))
"""


def _workdir(tmp_path) -> str:
  """A workdir of the tiny hyperteacher config, as train.py starts it."""
  workdir = str(tmp_path / "w")
  workdir_lib.prepare(workdir, load_config("hyperteacher", "tiny"))
  return workdir


def _holder(workdir: str, seconds: float) -> subprocess.Popen:
  """Another process holding the workdir's lock for `seconds`."""
  proc = subprocess.Popen([sys.executable, "-c", HOLD, workdir, str(seconds)], cwd=REPO,
                          stdout=subprocess.PIPE, text=True)
  assert proc.stdout.readline() == "held\n"
  return proc


def test_a_second_writer_is_refused_naming_the_holder(tmp_path):
  workdir = _workdir(tmp_path)
  holder = _holder(workdir, 30)
  try:
    with pytest.raises(ConfigError, match=f"in use by pid {holder.pid} ") as e:
      with workdir_lib.lock(workdir, wait_s=0):
        pytest.fail("two writers")
    assert "\n" not in str(e.value) and "-c" in str(e.value)  # the holder's command line
  finally:
    holder.kill()
    holder.wait()
  with workdir_lib.lock(workdir, wait_s=0):  # the kernel released the killed holder's lock
    assert "pid" in open(os.path.join(workdir, workdir_lib.LOCK_FILE)).read()
  assert open(os.path.join(workdir, workdir_lib.LOCK_FILE)).read() == ""


def test_a_waiting_writer_gets_the_lock_when_the_holder_ends(tmp_path):
  workdir = _workdir(tmp_path)
  holder = _holder(workdir, 1)
  start = time.monotonic()
  with workdir_lib.lock(workdir, wait_s=30):
    waited = time.monotonic() - start
  assert 0.5 < waited < 25  # it waited for the holder's second, then got the lock
  holder.wait()


@pytest.mark.parametrize("exists", [False, True])
def test_a_new_workdir_is_locked_by_prepare_and_not_written_before(tmp_path, exists):
  workdir = str(tmp_path / "new")
  if exists:
    os.makedirs(workdir)  # an empty directory is not a workdir yet
  with workdir_lib.lock(workdir, wait_s=0):
    # a config refused now would leave nothing behind
    assert os.listdir(tmp_path) == (["new"] if exists else []) and not (
        exists and os.listdir(workdir))
    workdir_lib.prepare(workdir, load_config("hyperteacher", "tiny"))
    other = subprocess.run([sys.executable, "-c", HOLD, workdir, "0"], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
    assert other.returncode == 1 and f"in use by pid {os.getpid()} " in other.stderr


def test_train_binary_refuses_a_held_workdir_in_one_line_and_writes_nothing(tmp_path):
  workdir = _workdir(tmp_path)
  holder = _holder(workdir, 60)
  try:
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "experiments", "train.py"),
         "--config=configs/hyperteacher.py:tiny", f"--workdir={workdir}"],
        capture_output=True, text=True, cwd=REPO, env=dict(os.environ, JAX_PLATFORMS="cpu"),
        timeout=300)
  finally:
    holder.kill()
    holder.wait()
  assert result.returncode == 2, result.stderr[-2000:]
  assert result.stderr.count("\n") == 1 and f"in use by pid {holder.pid} " in result.stderr
  assert sorted(os.listdir(workdir)) == [workdir_lib.LOCK_FILE, workdir_lib.CONFIG_FILE]
