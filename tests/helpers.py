"""Shared test helpers: load a preset from configs/ the way the binaries do; copy a sweep dir as
git keeps it."""

import importlib.util
import os
import shutil
import subprocess
import sys

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
COMMITTED_WORKDIR_FILES = ("config.json", "metrics.jsonl", "eval.jsonl", "probes.jsonl",
                           "params.json")


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


def run_sweep_binary(*args) -> subprocess.CompletedProcess:
  """experiments/sweep.py with `args`, from the repository root, output captured."""
  return subprocess.run([sys.executable, os.path.join(REPO, "experiments", "sweep.py"), *args],
                        capture_output=True, text=True, cwd=REPO, timeout=600)
