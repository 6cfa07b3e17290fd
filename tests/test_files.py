"""files: a write that fails part-way leaves the previous file whole; files staged together
replace their old versions only once all are written."""

import json
import os

import pytest

from compgen_jax import files


def test_write_text_replaces_and_makes_folders(tmp_path):
  path = str(tmp_path / "a" / "b" / "report.md")
  assert files.write_text(path, "old\n") == path
  files.write_text(path, "new\n")
  assert open(path).read() == "new\n"
  assert sorted(os.listdir(os.path.dirname(path))) == ["report.md"]


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
  path = str(tmp_path / "claims.json")
  files.write_json(path, {"v": 1})

  def torn(tmp, target):  # the process dies between writing the temporary file and the rename
    raise OSError("killed")

  monkeypatch.setattr(os, "replace", torn)
  with pytest.raises(OSError, match="killed"):
    files.write_json(path, {"v": 2})
  assert json.load(open(path)) == {"v": 1}


def test_write_jsonl_one_row_per_line(tmp_path):
  path = str(tmp_path / "eval.jsonl")
  files.write_jsonl(path, [{"step": 1}, {"step": 2, "x": 0.5}])
  assert [json.loads(line) for line in open(path)] == [{"step": 1}, {"step": 2, "x": 0.5}]


def test_files_staged_together_replace_the_old_only_at_commit(tmp_path):
  table, plot = str(tmp_path / "x" / "results.jsonl"), str(tmp_path / "x" / "plot.png")
  files.write_text(table, "old table\n")
  files.write_text(plot, "old plot\n")
  open(files.staged(table), "w").write("new table\n")  # the plot's writer then fails
  assert open(table).read() == "old table\n" and open(plot).read() == "old plot\n"
  # a later attempt starts from a clean staged file, not the torn one
  open(files.staged(table), "a").write("newer table\n")
  open(files.staged(plot), "w").write("new plot\n")
  files.commit(table, plot)
  assert open(table).read() == "newer table\n" and open(plot).read() == "new plot\n"
  assert sorted(os.listdir(tmp_path / "x")) == ["plot.png", "results.jsonl"]
