"""Metric rows (one per logging window and run) and their sinks: metrics.jsonl (always; analysis,
reports and resume read it) and optionally TensorBoard event files; jsonl readers; the progress bar.
"""

import json
import math
import os
import socket
import struct
import time
from collections.abc import Iterable
from typing import Protocol

import numpy as np
import tqdm
from tensorboardX.proto import event_pb2, summary_pb2
from tensorboardX.record_writer import masked_crc32c

from compgen_jax import checks, files
from compgen_jax import workdir as workdir_lib
from compgen_jax.types import ConfigError, DataError

# Row fields that say which run and step a row belongs to; every other number is a measurement.


def id_fields(grid: list[dict]) -> tuple[str, ...]:
  """The fields of a row that say which step and run it is (the rest are measurements)."""
  return ("step", *dict.fromkeys(k for run in grid for k in run))


def name_fields(grid: list[dict]) -> tuple[str, ...]:
  """What tells the runs of `grid` apart in a name: the seed and every field but the index that
  takes more than one value."""
  varying = (k for k in id_fields(grid)[1:]
             if k not in ("run", "seed") and len({repr(run.get(k)) for run in grid}) > 1)
  return ("seed", *varying)


def _plain(value):
  """JSON-safe Python scalar; non-finite floats become null-free strings json can read back."""
  if isinstance(value, np.generic | np.ndarray):
    value = value.item() if np.ndim(value) == 0 else np.asarray(value).tolist()
  if isinstance(value, float) and not math.isfinite(value):
    return str(value)  # "nan", "inf": json has no literal for these
  return value


def append_rows(path: str, rows: Iterable[dict]) -> None:
  """Appends rows to a jsonl file, one JSON object per line, in one write (so a kill leaves at
  most one torn last line, which read_rows drops). A torn last line already there is cut off
  first, so the new rows never run into it."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  text = "".join(json.dumps({k: _plain(v) for k, v in row.items()}) + "\n" for row in rows)
  if os.path.exists(path):
    _drop_torn_tail(path)
  with open(path, "a") as f:
    f.write(text)
    f.flush()


def _drop_torn_tail(path: str, block: int = 1 << 16) -> None:
  """Truncates `path` after its last newline (reading back from the end only as far as it)."""
  with open(path, "rb+") as f:
    end = f.seek(0, os.SEEK_END)
    pos = end
    while pos > 0:
      start = max(0, pos - block)
      f.seek(start)
      chunk = f.read(pos - start)
      if chunk.endswith(b"\n") and pos == end:
        return  # intact: the common case costs one small read
      cut = chunk.rfind(b"\n")
      if cut >= 0:
        f.truncate(start + cut + 1)
        return
      pos = start
    f.truncate(0)  # no newline at all: the whole file is one torn line


def read_rows(path: str) -> list[dict]:
  """All rows of a jsonl file ([] when it does not exist).

  A last line without its newline is what a killed writer leaves: it is dropped. Any other
  line that is not JSON is corruption: a DataError naming the file and line.
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
      raise DataError(f"{path!r} line {i + 1} is not JSON ({e}): the file is damaged; fix or "
                      "delete that line") from e
  return rows


def truncate_after(path: str, step: int) -> None:
  """Drops rows with step > `step` (rows written after the checkpoint a run resumes from) and a
  torn last line; step 0 empties the file (a restart before the first checkpoint)."""
  if not os.path.exists(path):
    return
  files.write_jsonl(path, [r for r in read_rows(path) if r.get("step", -1) <= step])


def replace_step_rows(path: str, step: int, rows: list[dict]) -> None:
  """Replaces the rows of `step` in a jsonl file with `rows` (a pass re-run over the same
  checkpoint), keeping every other row; written to a temporary file and renamed, so a kill
  leaves the old file or the new one, never neither."""
  kept = [r for r in read_rows(path) if r.get("step") != step]
  files.write_jsonl(path, [{k: _plain(v) for k, v in row.items()} for row in kept + list(rows)])


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


class MetricWriter(Protocol):
  """A sink for metric rows: `write` once per chunk (then flushed), `close` at the end."""

  def write(self, rows: list[dict]) -> None: ...

  def close(self) -> None: ...


class JsonlWriter:
  """metrics.jsonl: all rows of a chunk in one append (see append_rows)."""

  def __init__(self, path: str):
    self.path = path

  def write(self, rows: list[dict]) -> None:
    append_rows(self.path, rows)

  def close(self) -> None:
    pass


def _record(message) -> bytes:
  """A TFRecord: payload length (uint64 LE), its masked crc32c, the payload, its masked crc32c."""
  data = message.SerializeToString()
  header = struct.pack("<Q", len(data))
  return (header + struct.pack("<I", masked_crc32c(header)) + data
          + struct.pack("<I", masked_crc32c(data)))


def _is_number(value) -> bool:
  return isinstance(value, int | float | np.number) and not isinstance(value, bool | np.bool_)


class TensorBoardWriter:
  """TensorBoard scalars: one directory per run (`run_<i>_seed<s>` plus the `name_fields` values, so
  each seed and swept value is its own curve) holding one event file per attempt.

  Each file starts with the records tensorboardX's SummaryWriter(purge_step=resume_step + 1)
  writes (file_version, then file_version and SessionLog.START at the purge step): TensorBoard then
  drops every earlier point with step >= the purge step, i.e. what a killed attempt wrote after the
  checkpoint; the checkpoint step's own rows stay, as in metrics.jsonl. (The Rust data server
  ignores SessionLog but drops a series' points at or after any step it reads again, which the
  resumed attempt does for every series.) Records are appended and flushed synchronously, once per
  chunk: SummaryWriter hands events to a thread and its flush() does not wait for them, so a kill
  just after a checkpoint could lose rows up to it, which a resume never writes again.
  """

  def __init__(self, logdir: str, resume_step: int, name_fields: tuple[str, ...] = ("seed",),
               id_fields: tuple[str, ...] = ("step", "run", "seed")):
    self.logdir = logdir
    self.purge_step = resume_step + 1
    self.name_fields = name_fields
    self.id_fields = id_fields
    self._paths = {}  # run index -> this attempt's event file

  def _path(self, row: dict) -> str:
    if row["run"] not in self._paths:
      name = "_".join([f"run_{row['run']}"] + [
          f"{k}{row[k]:g}" if isinstance(row[k], float) else f"{k}{row[k]}"
          for k in self.name_fields])
      run_dir = os.path.join(self.logdir, name)
      os.makedirs(run_dir, exist_ok=True)
      # TensorBoard reads a run's files in name order: the attempt number keeps that order
      # chronological even when two attempts start within one second or on skewed clocks.
      attempt = sum("tfevents" in f for f in os.listdir(run_dir))
      path = os.path.join(run_dir, f"events.out.tfevents.{attempt:04d}.{int(time.time())}."
                          f"{socket.gethostname()}")
      now, version = time.time(), "brain.Event:2"
      start = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
      with open(path, "xb") as f:  # never overwrites an earlier attempt's file
        f.write(_record(event_pb2.Event(wall_time=now, file_version=version))
                + _record(event_pb2.Event(wall_time=now, step=self.purge_step,
                                          file_version=version))
                + _record(event_pb2.Event(wall_time=now, step=self.purge_step,
                                          session_log=start)))
      self._paths[row["run"]] = path
    return self._paths[row["run"]]

  def write(self, rows: list[dict]) -> None:
    chunks = {}  # path -> this chunk's records, appended in one write (as the jsonl rows are)
    for row in rows:
      values = [summary_pb2.Summary.Value(tag=k, simple_value=float(v))
                for k, v in row.items() if k not in self.id_fields and _is_number(v)]
      event = event_pb2.Event(wall_time=time.time(), step=int(row["step"]),
                              summary=summary_pb2.Summary(value=values))
      chunks.setdefault(self._path(row), []).append(_record(event))
    # Opened per chunk, not held: a sweep of thousands of runs stays under the open-file limit.
    # Closing flushes (users watch live); like the jsonl rows, no fsync (a killed process loses
    # nothing).
    for path, records in chunks.items():
      with open(path, "ab") as f:
        f.write(b"".join(records))

  def close(self) -> None:
    pass  # every chunk's records are already closed on disk


class Writers:
  """Several sinks behind the MetricWriter interface, written in order (jsonl first)."""

  def __init__(self, writers: list[MetricWriter]):
    self.writers = writers

  def write(self, rows: list[dict]) -> None:
    for w in self.writers:
      w.write(rows)

  def close(self) -> None:
    for w in self.writers:
      w.close()


WRITERS = {
    "jsonl": lambda workdir, step, grid: JsonlWriter(
        os.path.join(workdir, workdir_lib.METRICS_FILE)),
    "tensorboard": lambda workdir, step, grid: TensorBoardWriter(
        os.path.join(workdir, workdir_lib.TENSORBOARD_DIR), step, name_fields(grid),
        id_fields(grid)),
}


def validate_writers(names) -> None:
  """ConfigError naming train.writers for an unknown name or a missing jsonl."""
  checks.choices("train.writers", names, WRITERS, allow_empty=True)  # jsonl is checked next
  if "jsonl" not in names:
    raise ConfigError("train.writers", "must include 'jsonl': metrics.jsonl is what resume, the "
                      "final rows, analysis and reports read; other writers are extra sinks")


def make_writer(names, workdir: str, resume_step: int, grid: list[dict]) -> MetricWriter:
  """The sinks `names` (train.writers) for the runs `grid` of `workdir` resuming from
  `resume_step` (0 for a fresh start)."""
  names = tuple(names)
  validate_writers(names)
  return Writers([WRITERS[n](workdir, resume_step, grid) for n in dict.fromkeys(names)])


def progress_bar(total: int, initial: int = 0, desc: str = "train", disable: bool = False,
                 unit: str = "step"):
  """A tqdm bar over steps (or other units); updated between chunks only."""
  return tqdm.tqdm(total=total, initial=initial, desc=desc, unit=unit, dynamic_ncols=True,
                   disable=disable)
