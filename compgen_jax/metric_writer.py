"""jsonl metrics (one row per step and run), jsonl readers, and the progress bar."""

import json
import math
import os
from collections.abc import Iterable

import numpy as np
import tqdm


def _plain(value):
  """JSON-safe Python scalar; non-finite floats become null-free strings json can read back."""
  if isinstance(value, np.generic | np.ndarray):
    value = value.item() if np.ndim(value) == 0 else np.asarray(value).tolist()
  if isinstance(value, float) and not math.isfinite(value):
    return str(value)  # "nan", "inf": json has no literal for these
  return value


def append_rows(path: str, rows: Iterable[dict]) -> None:
  """Appends rows to a jsonl file, one JSON object per line."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "a") as f:
    for row in rows:
      f.write(json.dumps({k: _plain(v) for k, v in row.items()}) + "\n")


def read_rows(path: str) -> list[dict]:
  """All rows of a jsonl file ([] when it does not exist)."""
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def truncate_after(path: str, step: int) -> None:
  """Drops rows with step > `step` (rows written after the checkpoint a run resumes from)."""
  rows = [r for r in read_rows(path) if r.get("step", -1) <= step]
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    for row in rows:
      f.write(json.dumps(row) + "\n")
  os.replace(tmp, path)


def stacked_rows(metrics: dict, first_step: int, run_info: list[dict]) -> list[dict]:
  """Rows from stacked metrics {name: [steps, runs]}: one row per step and run."""
  arrays = {k: np.asarray(v) for k, v in metrics.items()}
  num_steps = next(iter(arrays.values())).shape[0]
  rows = []
  for t in range(num_steps):
    for r, info in enumerate(run_info):
      row = {"step": first_step + t, **info}
      row.update({k: float(a[t, r]) for k, a in arrays.items()})
      rows.append(row)
  return rows


def progress_bar(total: int, initial: int = 0, desc: str = "train", disable: bool = False):
  """A tqdm bar over steps; updated between chunks only."""
  return tqdm.tqdm(total=total, initial=initial, desc=desc, unit="step", dynamic_ncols=True,
                   disable=disable)
