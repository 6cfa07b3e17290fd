"""A workdir holds one config: written on first use, compared on every later use; and one writer
at a time (lock). This module names every file of a workdir, and the index of a sweep dir (a
folder of workdirs), so each name is spelled once."""

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Mapping

import ml_collections

from compgen_jax import files
from compgen_jax.types import ConfigError

CONFIG_FILE = "config.json"        # the resolved config (write / check)
# The top-level config field naming a config's application (apps.APPS), set by config files.
APP_FIELD = "app"
METRICS_FILE = "metrics.jsonl"     # training rows, one per logged step and run (metric_writer)
EVAL_FILE = "eval.jsonl"           # evaluator passes over checkpoints, one row per step and run
PROBE_FILE = "probes.jsonl"        # probe passes, one row per step, run and lambda (all layers)
CHECKPOINT_DIR = "checkpoints"     # orbax, one folder per saved step
PARAMS_FILE = "params.json"        # {"student": parameters of one run's student}, by training
TENSORBOARD_DIR = "tensorboard"    # event files of the optional TensorBoard writer
CURVES_FILE = "curves.png"         # learning curves drawn by the training binary
EVAL_CURVE_FILE = "eval_ood_r2.png"  # OOD R^2 over checkpoints, drawn by the evaluate binary
INDEX_FILE = "index.json"          # of a sweep dir: its programs and how they ran (sweeps/index)
# Of a sweep dir: its `paper` preset's programs as flattened configs, written at launch
# (sweeps/spec.write_paper_programs); a report's setting section compares with them.
PAPER_PROGRAMS_FILE = "paper_programs.json"
# Reports, every application's (apps.py: its record names the one it writes).
SWEEP_REPORT_FILE = "REPORT.md"    # of a sweep dir: analysis/sweep_report
REPORT_FILE = "report.md"          # of an images, letters, theorem or llm workdir
RUNS_DIR = "runs"                  # of a letters results dir: one workdir per run (letters/report)
CLAIMS_FILE = "claims.json"        # the verdicts of a report's claims (sweep reports, theorem)
SUMMARY_FILE = "summary.jsonl"     # llm: one row per benchmark and system (llm_eval/runner)
# llm: the diagnostics pass over a scored workdir's composed decodes (llm_eval/diagnose.py)
DIAGNOSTICS_FILE = "diagnostics.jsonl"  # a row per benchmark, composition and problem
DIAGNOSTICS_SUMMARY_FILE = "diagnostics_summary.jsonl"  # a row per benchmark and composition
PREDICTORS_FILE = "predictors.jsonl"    # AUC of each pre-scoring quantity as a failure predictor
# llm study: the digests of the files other stages wrote that a stage read (llm_study/pipeline)
INPUTS_FILE = "inputs.json"
# A workdir's rows: what a report reads (analysis/load.py), results/cpu/.gitignore keeps and a
# rerun is compared by (analysis/rerun.py); never checkpoints.
ROW_FILES = (CONFIG_FILE, METRICS_FILE, EVAL_FILE, PROBE_FILE, PARAMS_FILE)


def flatten(tree, prefix: str = "") -> dict:
  """{"a": {"b": 1}, "c.d": 2} -> {"a.b": 1, "c.d": 2} (a dict or ConfigDict, e.g. a
  config.json); lists become tuples."""
  out = {}
  for key, value in (tree.to_dict() if isinstance(tree, ml_collections.ConfigDict)
                     else dict(tree)).items():
    if isinstance(value, Mapping | ml_collections.ConfigDict):
      out.update(flatten(value, f"{prefix}{key}."))
    else:
      out[f"{prefix}{key}"] = tuple(value) if isinstance(value, list) else value
  return out


def as_tuples(value):
  """JSON lists (a config.json's) back to the tuples the config files use."""
  if isinstance(value, Mapping):
    return {k: as_tuples(v) for k, v in value.items()}
  return tuple(as_tuples(v) for v in value) if isinstance(value, list) else value


def check_unchanged(saved: ml_collections.ConfigDict, cfg: ml_collections.ConfigDict,
                   allowed: tuple[str, ...], what: str) -> None:
  """ConfigError naming the first field where `cfg` differs from the `saved` config of a workdir
  outside `allowed` (dotted names; a section covers its fields): what `what` may not change."""
  old, new = flatten(config_dict(saved)), flatten(config_dict(cfg))
  changed = [k for k in sorted(set(old) | set(new)) if old.get(k, "<absent>") != new.get(
      k, "<absent>") and not any(k == f or k.startswith(f + ".") for f in allowed)]
  if changed:
    k = changed[0]
    raise ConfigError(k, f"is {new.get(k, '<absent>')!r} but the workdir trained with "
                      f"{old.get(k, '<absent>')!r} (also differs: {changed[1:] or 'nothing'}); "
                      f"{what} may change only {', '.join(allowed) or 'nothing'}")


def config_dict(cfg: ml_collections.ConfigDict) -> dict:
  """The config as plain JSON data (tuples become lists)."""
  return json.loads(cfg.to_json_best_effort(sort_keys=True))


def check(workdir: str, cfg: ml_collections.ConfigDict) -> bool:
  """True when `workdir` already holds this config, False when it holds none; a different or
  damaged config (or a workdir that is a file) is a ConfigError naming what differs. Writes
  nothing."""
  path = os.path.join(workdir, CONFIG_FILE)
  new = config_dict(cfg)
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise ConfigError("workdir", f"{workdir!r} exists and is not a directory")
  if os.path.exists(path):
    old = _read_json(path)
    if not isinstance(old, dict):
      raise ConfigError("workdir", f"{path!r} holds a JSON {type(old).__name__}, not a "
                        "compgen_jax config; use a new --workdir")
    if APP_FIELD not in old:  # written before configs named their application
      new.pop(APP_FIELD, None)
    if old != new:
      diff = sorted(_diff_keys(old, new))
      raise ConfigError(
          "workdir", f"{workdir!r} holds a run with a different config (differs in: "
          f"{', '.join(diff[:10])}); use a new --workdir")
    return True
  return False


def prepare(workdir: str, cfg: ml_collections.ConfigDict) -> bool:
  """Creates `workdir` with config.json, or checks it holds the same config.

  Returns True when the workdir already existed with this config (a resume). A different
  config is refused with the fields that differ; nothing is overwritten.
  """
  if check(workdir, cfg):
    _lock_if_pending(workdir)  # another process made it since lock() was asked for
    return True
  path = os.path.join(workdir, CONFIG_FILE)
  try:
    os.makedirs(workdir, exist_ok=True)
    _lock_if_pending(workdir)  # before anything else is written
    open(os.path.join(workdir, LOCK_FILE), "a").close()  # part of every workdir (see lock)
    files.write_json(path, config_dict(cfg), indent=2, sort_keys=True)
  except OSError as e:
    raise ConfigError("workdir", f"cannot write {path!r}: {e.strerror or e}") from e
  return False


def _read_json(path: str):
  try:
    with open(path) as f:
      return json.load(f)
  except json.JSONDecodeError as e:
    raise ConfigError("workdir", f"{path!r} is not valid JSON ({e}); the workdir is damaged: "
                      "use a new --workdir") from e


def load_config(workdir: str) -> ml_collections.ConfigDict:
  """The config a workdir was trained with; a clear error when there is none."""
  path = os.path.join(workdir, CONFIG_FILE)
  if not os.path.exists(path):
    raise ConfigError("workdir", f"{workdir!r} has no {CONFIG_FILE}: not a compgen_jax workdir")
  data = _read_json(path)
  if not isinstance(data, dict):
    raise ConfigError("workdir", f"{path!r} holds a JSON {type(data).__name__}, not a config")
  return ml_collections.ConfigDict(data)


def _diff_keys(a, b, prefix=""):
  if isinstance(a, dict) and isinstance(b, dict):
    for k in set(a) | set(b):
      yield from _diff_keys(a.get(k), b.get(k), f"{prefix}{k}.")
  elif a != b:
    yield prefix.rstrip(".")


LOCK_FILE = ".lock"
# Seconds a writer waits for a workdir another process holds before refusing (default 0). The
# sweep launcher sets it for its programs: a re-run right after the sweep was killed finds the
# killed program's train.py still exiting.
LOCK_WAIT_ENV = "COMPGEN_JAX_LOCK_WAIT_S"
_held: dict[str, int] = {}  # real path -> this process's locked file descriptor
_pending: dict[str, float] = {}  # lock() of a workdir prepare has not made yet -> its wait


@contextlib.contextmanager
def lock(workdir: str, wait_s: float | None = None):
  """Holds the workdir's exclusive lock: one writer per workdir (training, a pass, a binary).

  An flock on WORKDIR/.lock, which holds the holder's pid, host and command; the kernel releases
  it when the holder dies, so a killed writer never leaves a stale lock. Another process holding
  it for longer than `wait_s` (default $COMPGEN_JAX_LOCK_WAIT_S, else 0) is a ConfigError naming
  that process. A directory that is not a workdir yet (no config.json) is locked by `prepare`
  when it makes it one, so a config refused before then leaves nothing behind. Re-entrant within
  a process.
  """
  key = os.path.realpath(workdir)
  if key in _held or key in _pending:
    yield
    return
  wait_s = float(os.environ.get(LOCK_WAIT_ENV) or 0) if wait_s is None else wait_s
  if os.path.isfile(os.path.join(workdir, CONFIG_FILE)):
    _held[key] = _acquire(workdir, wait_s)
  else:
    _pending[key] = wait_s
  try:
    yield
  finally:
    _pending.pop(key, None)
    fd = _held.pop(key, None)
    if fd is not None:
      os.ftruncate(fd, 0)
      os.close(fd)  # releases the flock


def _lock_if_pending(workdir: str) -> None:
  """Takes the lock that lock() was asked for before `workdir` was one."""
  key = os.path.realpath(workdir)
  if key in _pending:
    _held[key] = _acquire(workdir, _pending.pop(key))


def _acquire(workdir: str, wait_s: float) -> int:
  """Locks WORKDIR/.lock (waiting up to `wait_s`) and writes this process into it."""
  path = os.path.join(workdir, LOCK_FILE)
  try:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by child processes
  except OSError as e:
    raise ConfigError("workdir", f"cannot write {path!r}: {e.strerror or e}") from e
  deadline = time.monotonic() + wait_s
  while True:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      break
    except BlockingIOError:
      if time.monotonic() >= deadline:
        holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise ConfigError("workdir", f"{workdir!r} is in use by {holder}; wait for it to finish "
                          "or stop it (one writer per workdir)") from None
      time.sleep(0.1)
  command = " ".join(sys.argv)[:300].replace("\n", " ")
  os.ftruncate(fd, 0)
  os.pwrite(fd, f"pid {os.getpid()} (host {socket.gethostname()}: {command})\n".encode(), 0)
  return fd


def index_path(sweep_dir: str) -> str:
  return os.path.join(sweep_dir, INDEX_FILE)


# what indexes written before apps.py recorded as their "binary", by the application it ran
_BINARY_APPS = {"train": "scaling", "images": "images"}


def read_index(sweep_dir: str) -> dict:
  """The index of a sweep dir ({} when there is none), with its programs' application under
  "app" (older indexes name their binary instead: read as the application it ran)."""
  if not os.path.exists(index_path(sweep_dir)):
    return {}
  with open(index_path(sweep_dir)) as f:
    index = json.load(f)
  if "app" not in index and "binary" in index:
    index["app"] = _BINARY_APPS.get(index["binary"], index["binary"])
  return index


def located(sweep_dir: str, index: dict, recorded: str) -> str:
  """Where a path the index records (a workdir, a log) is now, the sweep dir being `sweep_dir`:
  relative paths are the sweep dir's; an absolute one under the sweep dir the index was written
  in moves with it (an older index, since copied); one elsewhere that is gone, DIR/<basename>."""
  if not os.path.isabs(recorded):
    return os.path.join(sweep_dir, recorded)
  inside = os.path.relpath(recorded, index.get("sweep_dir") or sweep_dir)
  if inside != os.pardir and not inside.startswith(os.pardir + os.sep):
    return os.path.normpath(os.path.join(sweep_dir, inside))
  return recorded if os.path.exists(recorded) else os.path.join(sweep_dir,
                                                                 os.path.basename(recorded))
