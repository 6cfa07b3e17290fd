"""What every benchmark module shares: the Problem/Benchmark types, stop-string truncation, jsonl
reading and settings checks. It sits below the benchmark modules so that benchmarks.py (the
registry) can import them without a cycle."""

import json
import os
from collections.abc import Callable
from typing import NamedTuple

import ml_collections

from compgen_jax import checks
from compgen_jax.types import ConfigError, DataError


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


def read_jsonl(path: str, fields: dict) -> list[tuple[int, dict]]:
  """(0-based line index, record) for each non-blank line; `fields` maps a required field to its
  type(s). Raises DataError naming the file (and line) for anything missing or malformed."""
  if not os.path.isfile(path):
    raise DataError(f"{path}: no such file")
  records = []
  with open(path, encoding="utf-8") as f:
    for index, line in enumerate(f):
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
    raise ConfigError(f"{prefix}.{name}", "required: the path of a local jsonl file")
  if not os.path.isfile(path):
    raise DataError(f"{path}: no such file ({prefix}.{name})")
