"""Whole-file writes that a kill cannot tear: the text goes to a temporary file beside the
target, which is then renamed over it, so a reader sees the old file or the new one."""

import json
import os


def write_text(path: str, text: str) -> str:
  """Replaces `path` with `text` atomically (its folder made if missing); returns the path."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    f.write(text)
  os.replace(tmp, path)
  return path


def write_json(path: str, obj, **dumps_kwargs) -> str:
  """write_text of json.dumps(obj, **dumps_kwargs)."""
  return write_text(path, json.dumps(obj, **dumps_kwargs))


def write_jsonl(path: str, rows) -> str:
  """write_text of one json.dumps(row) per line."""
  return write_text(path, "".join(json.dumps(row) + "\n" for row in rows))
