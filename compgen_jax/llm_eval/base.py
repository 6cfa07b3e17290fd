"""What every benchmark module shares: the Problem/Benchmark types, stop-string truncation, jsonl
reading and settings checks. It sits below the benchmark modules so that benchmarks.py (the
registry) can import them without a cycle."""

import gzip
import json
import os
import zlib
from collections.abc import Callable
from typing import NamedTuple

import ml_collections

from compgen_jax import checks
from compgen_jax.types import ConfigError, DataError

GZIP_MAGIC = b"\x1f\x8b"


class Problem(NamedTuple):
  """One benchmark item: `prompt` is the exact model input, `target` what scoring needs."""
  id: str  # task_id, or the 0-based line index in the data file
  prompt: str
  target: dict  # JSON-serialisable


class Benchmark(NamedTuple):
  """A benchmark as the runner sees it: settings, loading, stop strings and scoring."""
  name: str
  default_settings: Callable[[], ml_collections.ConfigDict]
  validate: Callable[[ml_collections.ConfigDict, str], None]
  load: Callable[[ml_collections.ConfigDict], list[Problem]]
  stop_strings: tuple[str, ...]
  score: Callable[[list[Problem], list[str], ml_collections.ConfigDict], list[dict]]
  headline: str


def truncate(completion: str, stop_strings) -> str:
  """The completion up to (not including) the earliest occurrence of any stop string."""
  cuts = [completion.find(s) for s in stop_strings if s]
  cuts = [c for c in cuts if c >= 0]
  return completion[:min(cuts)] if cuts else completion


def read_lines(path: str) -> list[str]:
  """The text lines of a jsonl file as distributed, plain or gzip-compressed (told by its first
  bytes, not its name: HumanEval ships as .jsonl.gz). DataError in one line if it cannot be read
  as UTF-8 text."""
  if not os.path.isfile(path):
    raise DataError(f"{path}: no such file")
  try:
    with open(path, "rb") as f:
      data = f.read()
  except OSError as e:
    raise DataError(f"{path}: cannot be read ({e.strerror or e})") from None
  if data[:2] == GZIP_MAGIC:
    try:
      data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
      raise DataError(f"{path}: a damaged gzip file ({e})") from None
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise DataError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason}); a jsonl file, "
                    "plain or gzip-compressed, is expected") from None
  # "\n" only: str.splitlines would also break at U+2028, which JSON strings may hold raw
  return text.replace("\r\n", "\n").split("\n")


def read_jsonl(path: str, fields: dict) -> list[tuple[int, dict]]:
  """(0-based line index, record) for each non-blank line of a plain or gzip jsonl file;
  `fields` maps a required field to its type(s). Raises DataError naming the file (and line)
  for anything missing or malformed."""
  records = []
  for index, line in enumerate(read_lines(path)):
    if not line.strip():
      continue
    where = f"{path}:{index + 1}"
    try:
      record = json.loads(line)
    except ValueError as e:
      raise DataError(f"{where}: not valid JSON ({e})") from None
    if not isinstance(record, dict):
      raise DataError(f"{where}: expected a JSON object, got {type(record).__name__}")
    for name, kind in fields.items():
      if name not in record:
        raise DataError(f"{where}: missing field {name!r}")
      if not isinstance(record[name], kind) or isinstance(record[name], bool):
        raise DataError(f"{where}: field {name!r} has type {type(record[name]).__name__}")
    records.append((index, record))
  if not records:
    raise DataError(f"{path}: no records")
  return records


def limited(items: list, settings: ml_collections.ConfigDict) -> list:
  """The first settings.limit items (0 = all)."""
  return items[:settings.limit] if settings.limit else items


def check_known(settings: ml_collections.ConfigDict, prefix: str, defaults) -> None:
  """ConfigError for a setting the benchmark does not have."""
  for name in sorted(settings):
    checks.choice(f"{prefix}.{name}", name, defaults)


def check_file(settings: ml_collections.ConfigDict, prefix: str, name: str) -> None:
  """ConfigError if the path setting is empty (it is required), DataError if no such file."""
  path = settings[name]
  if not isinstance(path, str) or not path:
    raise ConfigError(f"{prefix}.{name}", "required: the path of a local jsonl file (plain or "
                      ".jsonl.gz)")
  if not os.path.isfile(path):
    raise DataError(f"{path}: no such file ({prefix}.{name})")
