"""The config value checks every section shares: each raises ConfigError naming the field and
what it allows, before anything compiles."""

from collections.abc import Iterable

import numpy as np

from compgen_jax.types import ConfigError


def is_int(value) -> bool:
  """An integer (Python or numpy), not a bool."""
  return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _bound(low, high) -> str:
  if low is not None and high is not None:
    return f" in {low}..{high}"
  return f" >= {low}" if low is not None else f" <= {high}" if high is not None else ""


def _in_bounds(value, low, high) -> bool:
  return is_int(value) and (low is None or value >= low) and (high is None or value <= high)


def integer(field: str, value, low: int | None = None, high: int | None = None) -> None:
  """`value` is an integer in [low, high] (either bound may be open-ended)."""
  if not _in_bounds(value, low, high):
    raise ConfigError(field, f"must be an integer{_bound(low, high)}, got {value!r}")


def integers(field: str, values: Iterable, low: int | None = None,
             high: int | None = None) -> None:
  """A non-empty list of integers, each as `integer` requires."""
  values = tuple(values)
  if not values or not all(_in_bounds(v, low, high) for v in values):
    raise ConfigError(field, f"must be a non-empty list of integers{_bound(low, high)}, "
                      f"got {values}")


def positive(field: str, value) -> None:
  """A number (int or float, not a bool) > 0."""
  if isinstance(value, bool) or not isinstance(value, int | float | np.number) or not value > 0:
    raise ConfigError(field, f"must be a number > 0, got {value!r}")


def boolean(field: str, value) -> None:
  if not isinstance(value, bool):
    raise ConfigError(field, f"must be a bool, got {value!r}")


def choice(field: str, value, allowed: Iterable) -> None:
  """`value` is one of `allowed` (a registry's keys, a tuple of names)."""
  allowed = tuple(allowed)
  if value not in allowed:
    raise ConfigError(field, f"unknown {value!r}; allowed: {', '.join(map(str, allowed))}")
