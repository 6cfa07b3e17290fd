"""Metric writers: TensorBoard shows exactly the jsonl rows, also after a resume; config checks.

Event files are read back without TensorFlow: TFRecord framing parsed here, events decoded with
tensorboardX's bundled protobuf, and points kept or dropped the way TensorBoard's readers do.
"""

import os
import struct

import jax
import numpy as np
import pytest
from tensorboardX import SummaryWriter
from tensorboardX.proto.event_pb2 import Event, SessionLog
from tensorboardX.record_writer import masked_crc32c

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.scaling import train as scaling_train
from compgen_jax.training import chunk as chunk_lib
from compgen_jax.training import loop
from compgen_jax.types import ConfigError, NonFiniteError
from tests.helpers import load_config

BOTH = {"train.writers": ("jsonl", "tensorboard")}


def read_events(path: str) -> list[Event]:
  """The events of one file: [len u64 LE][masked crc32c of len][payload][masked crc32c]...

  A torn last record (a killed writer) is left out, as TensorBoard does until it is complete.
  """
  with open(path, "rb") as f:
    data = f.read()
  events, pos = [], 0
  while pos + 12 <= len(data):
    header = data[pos:pos + 8]
    (length,) = struct.unpack("<Q", header)
    assert data[pos + 8:pos + 12] == struct.pack("<I", masked_crc32c(header)), pos
    end = pos + 12 + length + 4
    if end > len(data):
      break
    payload = data[pos + 12:end - 4]
    assert data[end - 4:end] == struct.pack("<I", masked_crc32c(payload)), pos
    events.append(Event.FromString(payload))
    pos = end
  return events


def event_files(run_dir: str) -> list[str]:
  """A run's event files in the order TensorBoard reads them (by name)."""
  return [os.path.join(run_dir, f) for f in sorted(os.listdir(run_dir)) if "tfevents" in f]


def scalars(run_dir: str, honour: str = "session_log") -> dict[str, list[tuple[int, float]]]:
  """{tag: [(step, value), ...]} as TensorBoard shows a run.

  honour="session_log": the Python loader (EventAccumulator, purge_orphaned_data on): once a file
  says file_version brain.Event:2, a SessionLog START at step s drops every point with step >= s.
  honour="step_order": the Rust data server: a point at step s drops its series' points with
  step >= s. honour="nothing": every point of every file (what a reader without purging sees).
  """
  points, version = {}, None
  for path in event_files(run_dir):
    for e in read_events(path):
      version = e.file_version or version
      if (honour == "session_log" and version == "brain.Event:2"
          and e.session_log.status == SessionLog.START):
        points = {tag: [p for p in series if p[0] < e.step] for tag, series in points.items()}
      for value in e.summary.value:
        series = points.setdefault(value.tag, [])
        if honour == "step_order":
          series[:] = [p for p in series if p[0] < e.step]
        series.append((e.step, value.simple_value))
  return points


# What tells a scaling-experiment row's step and run (the rest are measurements).
ID_FIELDS = ("step", "run", "seed", "frac_ood", "learning_rate", "weight_decay", "n_train", "n_ood")


def expected_scalars(rows: list[dict], run: int) -> dict[str, list[tuple[int, float]]]:
  """What TensorBoard should show for one run: every measured number of its jsonl rows (float32,
  the width of a TensorBoard scalar), at the row's step."""
  expected = {}
  for row in (r for r in rows if r["run"] == run):
    for k, v in row.items():
      if k not in ID_FIELDS and isinstance(v, float | int):
        expected.setdefault(k, []).append((row["step"], float(np.float32(v))))
  return expected


def tensorboard_runs(workdir: str) -> dict[int, str]:
  """run index -> its event directory."""
  tb = os.path.join(workdir, workdir_lib.TENSORBOARD_DIR)
  return {int(name.split("_")[1]): os.path.join(tb, name) for name in os.listdir(tb)}


@pytest.fixture(scope="module")
def both_cfg():
  return load_config("hyperteacher", "tiny", **BOTH)


@pytest.fixture(scope="module")
def uninterrupted(both_cfg, tmp_path_factory):
  """A tiny run with jsonl and TensorBoard, trained in one go: its workdir."""
  workdir = str(tmp_path_factory.mktemp("uninterrupted"))
  scaling_train.train_and_evaluate(both_cfg, workdir)
  return workdir


def test_crc_is_crc32c():
  # The standard CRC-32C check value, then TFRecord's mask ((crc >> 15 | crc << 17) + 0xa282ead8).
  crc = 0xE3069283
  assert masked_crc32c(b"123456789") == ((crc >> 15 | crc << 17) + 0xA282EAD8) & 0xFFFFFFFF


def test_tensorboard_has_every_jsonl_value(uninterrupted, both_cfg):
  rows = metric_writer.read_rows(os.path.join(uninterrupted, workdir_lib.METRICS_FILE))
  dirs = tensorboard_runs(uninterrupted)
  assert sorted(os.path.basename(d) for d in dirs.values()) == ["run_0_seed0", "run_1_seed1"]
  for run, run_dir in dirs.items():
    shown = scalars(run_dir)
    assert shown == expected_scalars(rows, run)
    assert not set(shown) & set(ID_FIELDS)
    assert {"train/loss", "train/lr", "id/r2", "ood/r2"} <= set(shown)
    assert [s for s, _ in shown["train/loss"]] == list(range(10, 201, 10))
    assert [s for s, _ in shown["ood/r2"]] == [100, 200]


def test_default_writes_no_tensorboard(tmp_path):
  cfg = load_config("hyperteacher", "tiny")
  assert tuple(cfg.train.writers) == ("jsonl",)
  scaling_train.train_and_evaluate(cfg, str(tmp_path), stop_after=100)
  assert os.path.exists(tmp_path / workdir_lib.METRICS_FILE)
  assert not os.path.exists(tmp_path / workdir_lib.TENSORBOARD_DIR)


def test_resumed_curves_equal_uninterrupted(uninterrupted, both_cfg, tmp_path, monkeypatch):
  workdir = str(tmp_path / "resumed")
  scaling_train.train_and_evaluate(both_cfg, workdir, stop_after=100)
  # An attempt that writes rows past the checkpoint and dies (a non-finite chunk stands in for
  # the kill): its points at steps 110..150 are in the event files.
  monkeypatch.setattr(chunk_lib, "all_finite", lambda tree: jax.numpy.asarray(False))
  chunk_lib.make_chunk.cache_clear()
  with pytest.raises(NonFiniteError, match="step 150"):
    scaling_train.train_and_evaluate(both_cfg, workdir)
  monkeypatch.undo()
  chunk_lib.make_chunk.cache_clear()
  scaling_train.train_and_evaluate(both_cfg, workdir)

  reference, resumed = tensorboard_runs(uninterrupted), tensorboard_runs(workdir)
  assert resumed.keys() == reference.keys()
  for run, run_dir in resumed.items():
    assert len(event_files(run_dir)) == 3  # one per attempt
    for honour in ("session_log", "step_order"):
      assert scalars(run_dir, honour) == scalars(reference[run], honour)
    # Not vacuous: without purging, the dead attempt's points at 110..150 show twice.
    steps = [s for s, _ in scalars(run_dir, "nothing")["train/loss"]]
    assert steps == list(range(10, 151, 10)) + list(range(110, 201, 10))


def test_only_process_0_opens_the_writers(both_cfg, tmp_path, monkeypatch):
  # Another process of a jax.distributed job trains and checkpoints but never touches the
  # workdir's metrics.jsonl or event files (an empty append would still cut what looks like a
  # torn last line while process 0 writes; a second TensorBoard writer would purge its events).
  workdir = str(tmp_path / "other")
  scaling_train.train_and_evaluate(both_cfg, workdir, stop_after=100)
  metrics = os.path.join(workdir, workdir_lib.METRICS_FILE)
  with open(metrics, "ab") as f:
    f.write(b'{"step": 1')  # a torn last line, as process 0 mid-write leaves it
  files = {p: open(p, "rb").read() for p in [metrics] + [
      f for d in tensorboard_runs(workdir).values() for f in event_files(d)]}
  monkeypatch.setattr(loop.sharding, "is_main_process", lambda: False)
  scaling_train.train_and_evaluate(both_cfg, workdir)
  assert 200 in loop.checkpointing.available_steps(os.path.join(workdir, "checkpoints"))
  for path, content in files.items():
    assert open(path, "rb").read() == content, path
  assert len(tensorboard_runs(workdir)) == 2 and all(
      len(event_files(d)) == 1 for d in tensorboard_runs(workdir).values())


def test_purge_records_are_tensorboardx_purge_step(tmp_path):
  """The head of each event file is what tensorboardX's SummaryWriter(purge_step=...) writes."""
  SummaryWriter(str(tmp_path / "tbx"), purge_step=101).close()
  writer = metric_writer.TensorBoardWriter(str(tmp_path / "ours"), resume_step=100)
  writer.write([{"step": 110, "run": 0, "seed": 0, "train/loss": 0.5}])
  writer.close()

  def head(run_dir, n):
    events = [e for path in event_files(run_dir) for e in read_events(path)][:n]
    for e in events:
      e.wall_time = 0.0
    return events

  tbx = head(str(tmp_path / "tbx"), 10)
  assert [(e.step, e.file_version, e.session_log.status) for e in tbx] == [
      (0, "brain.Event:2", SessionLog.STATUS_UNSPECIFIED), (101, "brain.Event:2", 0),
      (101, "", SessionLog.START)]
  assert head(str(tmp_path / "ours" / "run_0_seed0"), 3) == tbx


def test_run_names_and_attempt_order(tmp_path):
  """Swept values name the run directories; a second attempt's file sorts after the first even
  within the same second."""
  cfg = load_config("hyperteacher", "tiny", **BOTH, **{"sweep.learning_rate": (1e-3, 3e-3)})
  rows = [{"step": 10, "run": r, "seed": 0, "frac_ood": 0.25, "learning_rate": lr,
           "weight_decay": 3e-3, "n_train": 16, "n_ood": 5, "train/loss": 1.0 + r}
          for r, lr in enumerate((1e-3, 3e-3))]
  for resume_step in (0, 0):
    grid = [{k: v for k, v in row.items() if k not in ("step", "train/loss")} for row in rows]
    writer = metric_writer.make_writer(cfg.train.writers, str(tmp_path), resume_step, grid)
    writer.write(rows)
    writer.close()
  dirs = tensorboard_runs(str(tmp_path))
  assert {os.path.basename(d) for d in dirs.values()} == {
      "run_0_seed0_learning_rate0.001", "run_1_seed0_learning_rate0.003"}
  files = event_files(dirs[1])
  assert [os.path.basename(f).split(".")[3] for f in files] == ["0000", "0001"]
  assert scalars(dirs[1]) == {"train/loss": [(10, 2.0)]}
  assert len(metric_writer.read_rows(str(tmp_path / workdir_lib.METRICS_FILE))) == 4


@pytest.mark.parametrize("writers, match", [
    (("jsonl", "wandb"), "unknown 'wandb'"),
    (("tensorboard",), "must include 'jsonl'"),
])
def test_bad_writers_are_refused_before_writing(writers, match, tmp_path):
  cfg = load_config("hyperteacher", "tiny", **{"train.writers": writers})
  with pytest.raises(ConfigError, match=match) as e:
    scaling_train.train_and_evaluate(cfg, str(tmp_path / "w"))
  assert e.value.field == "train.writers"
  assert not os.path.exists(tmp_path / "w")


def test_replace_step_rows_keeps_other_steps_and_replaces_that_one(tmp_path):
  path = str(tmp_path / "eval.jsonl")
  metric_writer.append_rows(path, [{"step": 1, "a": 1.0}, {"step": 2, "a": 2.0},
                                   {"step": 2, "a": 2.5}])
  metric_writer.replace_step_rows(path, 2, [{"step": 2, "a": 9.0}])
  assert metric_writer.read_rows(path) == [{"step": 1, "a": 1.0}, {"step": 2, "a": 9.0}]
  metric_writer.replace_step_rows(path, 3, [{"step": 3, "a": float("nan")}])
  rows = metric_writer.read_rows(path)
  assert [r["step"] for r in rows] == [1, 2, 3] and rows[-1]["a"] == "nan"
  assert not os.path.exists(path + ".tmp")
