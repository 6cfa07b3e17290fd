"""Shared test helpers: load a preset from configs/ the way the binaries do; copy a sweep dir as
git keeps it; kill a training process at its first checkpoint."""

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time

from compgen_jax import checkpointing
from compgen_jax import workdir as workdir_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_config(name: str, preset: str, **overrides):
  """configs/<name>.py:<preset> with dotted overrides, e.g. {'train.num_steps': 100}."""
  spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, "configs", f"{name}.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  cfg = module.get_config(preset)
  for path, value in overrides.items():
    *parents, leaf = path.split(".")
    node = cfg
    for p in parents:
      node = node[p]
    node[leaf] = value
  return cfg


# What results/cpu/.gitignore keeps of a program workdir: the files a report reads.
COMMITTED_WORKDIR_FILES = workdir_lib.ROW_FILES


def committed_copy(sweep_dir: str, dest: str) -> str:
  """A copy of `sweep_dir` holding what git keeps of it (results/cpu/.gitignore): its own files
  (index.json, REPORT.md, figures) and each program's small files; no checkpoints, logs, locks."""
  os.makedirs(dest)
  for name in os.listdir(sweep_dir):
    src = os.path.join(sweep_dir, name)
    if os.path.isfile(src):
      shutil.copy2(src, dest)
      continue
    for kept in COMMITTED_WORKDIR_FILES:
      if os.path.isfile(os.path.join(src, kept)):
        os.makedirs(os.path.join(dest, name), exist_ok=True)
        shutil.copy2(os.path.join(src, kept), os.path.join(dest, name))
  return dest


def sweep_config_file(tmp_path_factory, text: str, name: str) -> str:
  """A sweep config file holding `text`, in a fresh temporary folder: its path."""
  path = tmp_path_factory.mktemp("configs") / f"{name}.py"
  path.write_text(text)
  return str(path)


def run_sweep_binary(*args) -> subprocess.CompletedProcess:
  """experiments/sweep.py with `args`, from the repository root, output captured."""
  return subprocess.run([sys.executable, os.path.join(REPO, "experiments", "sweep.py"), *args],
                        capture_output=True, text=True, cwd=REPO, timeout=600)


def kill_at_first_checkpoint(proc: subprocess.Popen, ckpt_dir: str, final_step: int) -> list[int]:
  """SIGKILLs the training process `proc` as soon as `ckpt_dir` holds a checkpoint, and checks
  it was interrupted (its final step not saved); returns the steps saved by then."""
  deadline = time.monotonic() + 300
  while not checkpointing.available_steps(ckpt_dir):
    assert proc.poll() is None and time.monotonic() < deadline, "no checkpoint came"
    time.sleep(0.05)
  os.kill(proc.pid, signal.SIGKILL)
  proc.wait()
  steps = checkpointing.available_steps(ckpt_dir)
  assert final_step not in steps, f"finished before the kill ({steps}): nothing interrupted"
  return steps


def finish(proc: subprocess.Popen) -> None:
  """Waits for `proc` (started with stderr=PIPE, text=True) and checks it exited 0."""
  _, err = proc.communicate(timeout=600)
  assert proc.returncode == 0, err[-3000:]
