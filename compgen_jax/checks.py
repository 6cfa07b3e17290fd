"""The config value checks every section shares: each raises ConfigError naming the field, what
it allows and what it got, before anything compiles."""

from collections.abc import Iterable

import numpy as np

from compgen_jax.types import ConfigError


def is_int(value) -> bool:
  """An integer (Python or numpy), not a bool."""
  return isinstance(value, int | np.integer) and not isinstance(value, bool)


def is_number(value) -> bool:
  """A real number (Python or numpy, integer or float), not a bool."""
  return is_int(value) or isinstance(value, float | np.floating)


def _in_bounds(value, low, high, low_open=False, high_open=False) -> bool:
  # Each comparison holds for an in-range value (never 'not value < low'): NaN is never in bounds.
  return ((low is None or (value > low if low_open else value >= low))
          and (high is None or (value < high if high_open else value <= high)))


def _bound(low, high, low_open=False, high_open=False, ints=False) -> str:
  """' in 1..5' (integers), ' in [0, 1)', ' > 0', ' <= 1', or '' without bounds."""
  if low is not None and high is not None:
    if ints:
      return f" in {low}..{high}"
    return f" in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
  if low is not None:
    return f" {'>' if low_open else '>='} {low}"
  return f" {'<' if high_open else '<='} {high}" if high is not None else ""


def _tuple(values) -> tuple | None:
  """`values` as a tuple; None for a string or a non-iterable (not a list of values)."""
  if isinstance(values, str | bytes) or not isinstance(values, Iterable):
    return None
  return tuple(values)


def integer(field: str, value, low: int | None = None, high: int | None = None, *,
            multiple_of: int | None = None) -> None:
  """`value` is an integer in [low, high] (either bound may be open-ended), and a multiple of
  `multiple_of` when given."""
  if not (is_int(value) and _in_bounds(value, low, high)
          and (multiple_of is None or value % multiple_of == 0)):
    multiple = f", a multiple of {multiple_of}" if multiple_of is not None else ""
    raise ConfigError(field, f"must be an integer{_bound(low, high, ints=True)}{multiple}, "
                      f"got {value!r}")


def integers(field: str, values: Iterable, low: int | None = None,
             high: int | None = None) -> None:
  """A non-empty list of integers, each as `integer` requires."""
  given = _tuple(values)
  if not given or not all(is_int(v) and _in_bounds(v, low, high) for v in given):
    raise ConfigError(field, f"must be a non-empty list of integers{_bound(low, high, ints=True)}"
                      f", got {values if given is None else given!r}")


def number(field: str, value, low: float | None = None, high: float | None = None, *,
           low_open: bool = False, high_open: bool = False) -> None:
  """`value` is a real number (int or float, not a bool; never NaN) from low to high, each bound
  included unless `low_open` / `high_open` (either may be left out): a fraction in [0, 1) is
  `number(f, v, 0, 1, high_open=True)`."""
  if not (is_number(value) and _in_bounds(value, low, high, low_open, high_open)):
    raise ConfigError(field, f"must be a number{_bound(low, high, low_open, high_open)}, "
                      f"got {value!r}")


def numbers(field: str, values: Iterable, low: float | None = None, high: float | None = None,
            *, low_open: bool = False, high_open: bool = False,
            allow_empty: bool = False) -> None:
  """A list of numbers, each as `number` requires; non-empty unless `allow_empty`."""
  given = _tuple(values)
  if (given is None or not (given or allow_empty)
      or not all(is_number(v) and _in_bounds(v, low, high, low_open, high_open) for v in given)):
    raise ConfigError(field, f"must be a {'' if allow_empty else 'non-empty '}list of numbers"
                      f"{_bound(low, high, low_open, high_open)}, "
                      f"got {values if given is None else given!r}")


def positive(field: str, value) -> None:
  """A number (int or float, not a bool) > 0."""
  number(field, value, 0, low_open=True)


def boolean(field: str, value) -> None:
  """`value` is True or False (not 0 / 1)."""
  if not isinstance(value, bool):
    raise ConfigError(field, f"must be a bool, got {value!r}")


def choice(field: str, value, allowed: Iterable) -> None:
  """`value` is one of `allowed` (a registry's keys, a tuple of names)."""
  allowed = tuple(allowed)
  if value not in allowed:
    raise ConfigError(field, f"unknown {value!r}; allowed: {', '.join(map(str, allowed))}")


def choices(field: str, values: Iterable, allowed: Iterable, *, allow_empty: bool = False) -> None:
  """A list of names, each one of `allowed` (as `choice`); non-empty unless `allow_empty`."""
  allowed, given = tuple(allowed), _tuple(values)
  if given is None or not (given or allow_empty):
    raise ConfigError(field, f"must be a {'' if allow_empty else 'non-empty '}list, each one of: "
                      f"{', '.join(map(str, allowed))}; got {values!r}")
  for value in given:
    choice(field, value, allowed)
