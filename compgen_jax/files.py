"""Whole-file writes that a kill cannot tear: the text goes to a temporary file beside the
target, which is then renamed over it, so a reader sees the old file or the new one. Several
files written together (a table and its plot) are staged first and renamed only once all are
written, so a failure in between leaves every old one as it was."""

import json
import os


def staged(path: str) -> str:
  """The temporary file beside `path` that `commit` renames over it (<path>.tmp, which the
  results' .gitignore skips); its folder made, a stale one left by a failed attempt removed."""
  tmp = path + ".tmp"
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  if os.path.exists(tmp):
    os.remove(tmp)
  return tmp


def commit(*paths: str) -> None:
  """Renames each path's staged file over it (each rename atomic: a reader sees old or new)."""
  for path in paths:
    os.replace(path + ".tmp", path)


def write_text(path: str, text: str) -> str:
  """Replaces `path` with `text` atomically (its folder made if missing); returns the path."""
  with open(staged(path), "w") as f:
    f.write(text)
  commit(path)
  return path


def write_json(path: str, obj, **dumps_kwargs) -> str:
  """write_text of json.dumps(obj, **dumps_kwargs)."""
  return write_text(path, json.dumps(obj, **dumps_kwargs))


def write_jsonl(path: str, rows) -> str:
  """write_text of one json.dumps(row) per line."""
  return write_text(path, "".join(json.dumps(row) + "\n" for row in rows))
