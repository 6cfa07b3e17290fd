"""Runs survive interruptions: restarts leave exactly an uninterrupted run's rows; damaged
workdirs give one-line errors."""

import json
import os
import subprocess
import sys

import pytest

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.scaling import train as scaling_train
from compgen_jax.types import ConfigError
from tests.helpers import REPO, load_config


def _cfg(**kw):
  return load_config("hyperteacher", "tiny", **{"num_seeds": 1, "train.num_steps": 100,
                                                "train.checkpoint_every": 100, **kw})


def test_kills_before_the_first_checkpoint_leave_no_extra_rows(tmp_path):
  """Rows of steps 1..k from several killed attempts (no checkpoint yet), plus a torn last line,
  are gone after a restart: the rows equal an uninterrupted run's."""
  cfg = _cfg()
  clean = str(tmp_path / "clean")
  scaling_train.train_and_evaluate(cfg, clean)
  want = metric_writer.read_rows(os.path.join(clean, workdir_lib.METRICS_FILE))
  killed = str(tmp_path / "killed")
  workdir_lib.prepare(killed, cfg)
  path = os.path.join(killed, workdir_lib.METRICS_FILE)
  for _ in range(3):  # three attempts that died after writing 50 steps
    metric_writer.append_rows(path, want[:50])
  with open(path, "a") as f:
    f.write('{"step": 51, "tra')  # killed mid-write
  scaling_train.train_and_evaluate(cfg, killed)
  assert metric_writer.read_rows(path) == want


def test_torn_last_line_is_dropped_and_other_garbage_is_an_error(tmp_path):
  path = str(tmp_path / "m.jsonl")
  metric_writer.append_rows(path, [{"step": 1, "a": 1.0}, {"step": 2, "a": 2.0}])
  with open(path, "a") as f:
    f.write('{"step": 3, "a"')
  assert metric_writer.read_rows(path) == [{"step": 1, "a": 1.0}, {"step": 2, "a": 2.0}]
  metric_writer.truncate_after(path, 5)
  with open(path) as f:
    assert f.read().endswith("}\n")
  with open(path, "a") as f:
    f.write("garbage\n")
  with pytest.raises(ValueError, match="line 3"):
    metric_writer.read_rows(path)


@pytest.mark.parametrize("block", [4, 1 << 16])  # a torn line longer / shorter than a block
@pytest.mark.parametrize("before", [0, 2])
def test_appending_after_a_torn_line_cuts_it_off_first(tmp_path, block, before, monkeypatch):
  """append_rows after a kill mid-append: the torn line goes, the new rows follow the intact
  ones (also when the torn line is the whole file)."""
  real = metric_writer._drop_torn_tail
  monkeypatch.setattr(metric_writer, "_drop_torn_tail", lambda p: real(p, block))
  path = str(tmp_path / "m.jsonl")
  old = [{"step": i, "a": float(i)} for i in range(before)]
  if old:
    metric_writer.append_rows(path, old)
  with open(path, "a") as f:
    f.write('{"step": 9, "text": "a long row cut by a kill')
  metric_writer.append_rows(path, [{"step": 10, "a": 1.0}])
  assert metric_writer.read_rows(path) == old + [{"step": 10, "a": 1.0}]
  metric_writer.append_rows(path, [{"step": 11, "a": 2.0}])  # an intact file is left as is
  assert metric_writer.read_rows(path)[-2:] == [{"step": 10, "a": 1.0}, {"step": 11, "a": 2.0}]


@pytest.mark.parametrize("content,match", [("{not json", "not valid JSON"),
                                           ("[1, 2]", "JSON list")])
def test_damaged_config_json_is_a_config_error(tmp_path, content, match):
  workdir = tmp_path / "w"
  workdir.mkdir()
  (workdir / "config.json").write_text(content)
  with pytest.raises(ConfigError, match=match):
    workdir_lib.prepare(str(workdir), _cfg())


def test_workdir_that_is_a_file_or_unwritable(tmp_path):
  afile = tmp_path / "afile"
  afile.write_text("x")
  with pytest.raises(ConfigError, match="not a directory"):
    workdir_lib.prepare(str(afile), _cfg())
  with pytest.raises(ConfigError, match="cannot write"):
    workdir_lib.prepare(str(afile / "sub"), _cfg())


def test_train_binary_one_line_errors_for_damaged_workdirs(tmp_path):
  bad = tmp_path / "bad"
  bad.mkdir()
  (bad / "config.json").write_text(json.dumps([1]))
  afile = tmp_path / "afile"
  afile.write_text("x")
  for workdir in (bad, afile):
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "experiments", "train.py"),
         "--config=configs/hyperteacher.py:tiny", f"--workdir={workdir}"],
        capture_output=True, text=True, cwd=REPO, env=dict(os.environ, JAX_PLATFORMS="cpu"),
        timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.startswith("error:") and "Traceback" not in result.stderr
