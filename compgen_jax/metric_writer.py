"""jsonl metrics (one row per logging window and run), jsonl readers, and the progress bar."""

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
  """Appends rows to a jsonl file, one JSON object per line, in one write (so a kill leaves at
  most one torn last line, which read_rows drops)."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  text = "".join(json.dumps({k: _plain(v) for k, v in row.items()}) + "\n" for row in rows)
  with open(path, "a") as f:
    f.write(text)
    f.flush()


def read_rows(path: str) -> list[dict]:
  """All rows of a jsonl file ([] when it does not exist).

  A last line without its newline is what a killed writer leaves: it is dropped. Any other
  line that is not JSON is corruption and raises ValueError naming the file and line.
  """
  if not os.path.exists(path):
    return []
  with open(path) as f:
    lines = f.read().split("\n")
  lines.pop()  # "" after a final newline, else an unterminated (torn) last line: dropped
  rows = []
  for i, line in enumerate(lines):
    if not line.strip():
      continue
    try:
      rows.append(json.loads(line))
    except json.JSONDecodeError as e:
      raise ValueError(f"{path!r} line {i + 1} is not JSON: {e}") from e
  return rows


def truncate_after(path: str, step: int) -> None:
  """Drops rows with step > `step` (rows written after the checkpoint a run resumes from) and a
  torn last line; step 0 empties the file (a restart before the first checkpoint)."""
  if not os.path.exists(path):
    return
  rows = [r for r in read_rows(path) if r.get("step", -1) <= step]
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    for row in rows:
      f.write(json.dumps(row) + "\n")
  os.replace(tmp, path)


# How a window of per-step training metrics becomes one row (default: the mean).
WINDOW_REDUCERS = {"train/lr": lambda a: a[-1], "train/grad_norm": lambda a: a.max(axis=0)}


def window_means(metrics: dict, window: int) -> dict:
  """{name: [steps, runs]} -> {name: [steps // window, runs]}: one value per window of steps
  (mean; the last learning rate; the largest gradient norm)."""
  out = {}
  for name, values in metrics.items():
    values = np.asarray(values)
    windows = values.reshape(values.shape[0] // window, window, *values.shape[1:])
    reduce = WINDOW_REDUCERS.get(name, lambda a: a.mean(axis=0))
    out[name] = np.stack([reduce(w) for w in windows])
  return out


def stacked_rows(metrics: dict, first_step: int, run_info: list[dict],
                 every: int = 1) -> list[dict]:
  """Rows from stacked metrics {name: [steps, runs]}: one row per step and run.

  With `every` > 1 each row stands for `every` steps and carries the step that ends them.
  """
  arrays = {k: np.asarray(v) for k, v in metrics.items()}
  num_rows = next(iter(arrays.values())).shape[0]
  rows = []
  for t in range(num_rows):
    for r, info in enumerate(run_info):
      row = {"step": first_step + t * every, **info}
      row.update({k: float(a[t, r]) for k, a in arrays.items()})
      rows.append(row)
  return rows


def progress_bar(total: int, initial: int = 0, desc: str = "train", disable: bool = False):
  """A tqdm bar over steps; updated between chunks only."""
  return tqdm.tqdm(total=total, initial=initial, desc=desc, unit="step", dynamic_ncols=True,
                   disable=disable)
