"""What a study stage's outputs were made from: the sha256 of the files other stages wrote and
it read, recorded in its directory (workdir.INPUTS_FILE) before it runs; outputs made from other
inputs are moved to a stale/ folder, never reused or overwritten (llm_study/pipeline.py)."""

import hashlib
import json
import os

from compgen_jax import files
from compgen_jax import workdir as workdir_lib

STALE_DIR = "stale"


def digest(path: str) -> str:
  """sha256 of a file, or of a directory's files (their relative names, sizes and bytes)."""
  h = hashlib.sha256()
  if os.path.isdir(path):
    names = sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path)
                   for f in fs)
  else:
    names = [""]
  for name in names:
    full = os.path.join(path, name) if name else path
    h.update(f"{name}\0{os.path.getsize(full)}\0".encode())
    with open(full, "rb") as f:
      for block in iter(lambda f=f: f.read(1 << 20), b""):
        h.update(block)
  return h.hexdigest()


def recorded(stage_dir: str) -> dict | None:
  """The inputs a stage's directory was made from (its inputs.json); {} for a directory with
  files but no readable record (not known to match: a damaged record is set aside with the
  outputs, as a missing one); None when no file is there."""
  path = os.path.join(stage_dir, workdir_lib.INPUTS_FILE)
  if os.path.isfile(path):
    try:
      with open(path) as f:
        record = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError):
      return {}
    readable = isinstance(record, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in record.items())
    return record if readable and record else {}
  has_files = os.path.isdir(stage_dir) and any(
      f != workdir_lib.LOCK_FILE for _, _, fs in os.walk(stage_dir) for f in fs)
  return {} if has_files else None


def changed(old: dict, new: dict) -> str:
  """The keys whose digests differ (the first three), or that there was no readable record."""
  if not old:
    return f"no readable {workdir_lib.INPUTS_FILE}"
  keys = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
  return ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")


def record(stage_dir: str, inputs: dict) -> None:
  """Writes the stage's {path: sha256} record, making its directory if needed."""
  os.makedirs(stage_dir, exist_ok=True)
  files.write_json(os.path.join(stage_dir, workdir_lib.INPUTS_FILE), inputs, indent=2,
                   sort_keys=True)


def set_aside(stage_dir: str, stale_dir: str, name: str) -> str:
  """Moves a stage's directory to stale_dir/<name>.<n> (the first n free): earlier results are
  kept, never overwritten. Returns where."""
  os.makedirs(stale_dir, exist_ok=True)
  n = 0
  while os.path.exists(target := os.path.join(stale_dir, f"{name}.{n}")):
    n += 1
  os.makedirs(os.path.dirname(target), exist_ok=True)  # a recipe's stage: <recipe>/<stage>
  os.rename(stage_dir, target)
  return target
