"""Dimension vocabulary used in names, and small shared containers.

Shape suffixes in names use these letters:
  R runs (seeds x sweep values, the vmapped axis)   S seeds
  B tasks in a batch     T tasks in the task table    N samples per task
  M modules              K maximum hotness            I teacher input dim
  H teacher hidden dim   O output dim                 E encoding dim
  D student features     L layers                     V vocabulary
"""

from typing import Any

import chex

PyTree = Any
Array = chex.Array
PRNGKey = chex.PRNGKey

class ConfigError(ValueError):
  """A config value is impossible or unknown; the message names the field."""

  def __init__(self, field: str, message: str):
    super().__init__(f"config field '{field}': {message}")
    self.field = field


class CheckpointError(RuntimeError):
  """A checkpoint is missing, corrupt or from an incompatible config."""


class DataError(ValueError):
  """A data file (e.g. a local benchmark jsonl) is missing or malformed; the message names it."""


class NonFiniteError(RuntimeError):
  """Training produced a non-finite loss or parameters."""
