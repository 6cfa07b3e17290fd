"""Shared test helpers: load a preset from configs/ the way the binaries do; copy a sweep dir as
git keeps it; kill a training process at its first checkpoint."""

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from compgen_jax import checkpointing
from compgen_jax import workdir as workdir_lib
from compgen_jax.lm import gemma2

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


def llm_config(preset: str = "tiny"):
  """configs/llm.py:<preset> as the llm_compose binary loads it."""
  from compgen_jax import cli  # noqa: PLC0415 - only the LLM tests need the config-file loader

  return cli.load_config_file(os.path.join(REPO, "configs", f"llm.py:{preset}"))


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


# Runs argv[4:] as uid argv[1] / gid argv[2] in a mount namespace of its own, where the paths in
# the JSON list argv[3] are reachable: an ancestor closed to other users (a clone under /root,
# pyenv's interpreter) is covered, in this namespace only, by a tmpfs holding just those paths.
AS_USER = """
import json, os, stat, subprocess, sys, tempfile
uid, gid, paths, argv = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4:]
def closed(d):
    return not os.stat(d).st_mode & stat.S_IXOTH
covers = {}
for path in paths:
    parts = path.split("/")[1:-1]
    ancestors = ["/" + "/".join(parts[:i + 1]) for i in range(len(parts))]
    top = next((a for a in ancestors if closed(a)), None)
    if top and not any(path.startswith(p + "/") for p in paths):
        covers.setdefault(top, []).append(path)
stage = tempfile.mkdtemp(dir="/tmp")  # never under a covered ancestor: /tmp is open to all
for k, (top, inside) in enumerate(covers.items()):
    staged = [f"{stage}/{k}-{i}" for i in range(len(inside))]
    for path, spot in zip(inside, staged):
        os.mkdir(spot)
        subprocess.run(["mount", "--rbind", path, spot], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", top], check=True)
    for path, spot in zip(inside, staged):
        os.makedirs(path)
        subprocess.run(["mount", "--move", spot, path], check=True)
        os.rmdir(spot)
os.rmdir(stage)
os.setgroups([])
os.setresgid(gid, gid, gid)
os.setresuid(uid, uid, uid)
os.execv(argv[0], argv)
"""


def ordinary_user(prefix: str) -> tuple[int, int, str]:
  """(uid, gid, name) of a new ordinary user (useradd, no home); remove it with userdel."""
  name = f"{prefix}{os.getpid()}"
  subprocess.run(["useradd", "--no-create-home", "--user-group", "--shell", "/bin/false", name],
                 check=True, capture_output=True)
  ids = subprocess.run(["id", "-u", name], capture_output=True, text=True, check=True).stdout
  gid = subprocess.run(["id", "-g", name], capture_output=True, text=True, check=True).stdout
  return int(ids), int(gid), name


def run_as(uid: int, gid: int, argv: list[str], env: dict, timeout_s: float
           ) -> subprocess.CompletedProcess:
  """argv as that user, from the repository root, able to reach this checkout, its interpreter
  and env["HOME"] (AS_USER), output captured."""
  paths = sorted({os.path.realpath(p) for p in (REPO, sys.prefix, sys.base_prefix, env["HOME"])})
  return subprocess.run(
      ["unshare", "--mount", "--propagation", "private", sys.executable, "-c", AS_USER,
       str(uid), str(gid), json.dumps(paths), *argv],
      capture_output=True, text=True, cwd=REPO, env=env, timeout=timeout_s)


# A small Gemma-2 (two layers, one of them sliding-window) for the composition decoding tests.
TINY_GEMMA = gemma2.Gemma2Config(
    vocab_size=32, width=16, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=8, mlp_dim=32,
    rms_eps=1e-6, rope_base=10_000.0, query_pre_attn_scalar=8.0, attn_softcap=50.0,
    final_softcap=30.0, sliding_window=4, sliding_layers=(True, False), bos_id=2, eos_id=1,
    pad_id=0)


def tiny_gemma_params(num_models: int = 3) -> tuple:
  """Random TINY_GEMMA parameters of `num_models` models (background first), scaled up so the
  models are far from uniform (clear argmaxes, rare EOS ties)."""
  return tuple(jax.tree.map(lambda x: 3.0 * x, gemma2.init_params(TINY_GEMMA, k))
               for k in jax.random.split(jax.random.key(0), num_models))


def tiny_gemma_prompts(lens=(6, 3, 5)) -> tuple:
  """Left-padded TINY_GEMMA prompts [B, P] of the given lengths (BOS, then random tokens
  3..31) and their valid mask."""
  p = max(lens)
  toks = np.array(jax.random.randint(jax.random.key(1), (len(lens), p), 3, TINY_GEMMA.vocab_size))
  valid = np.arange(p)[None] >= p - np.asarray(lens)[:, None]
  toks[np.arange(len(lens)), np.argmax(valid, axis=1)] = TINY_GEMMA.bos_id
  return jnp.asarray(np.where(valid, toks, TINY_GEMMA.pad_id), jnp.int32), jnp.asarray(valid)
