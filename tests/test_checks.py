"""The shared config value checks: what each accepts, and a message naming field and bound."""

import numpy as np
import pytest

from compgen_jax import checks
from compgen_jax.types import ConfigError


def test_integer_accepts_ints_in_bounds_only():
  checks.integer("a.n", 3, 1, 5)
  checks.integer("a.n", np.int32(3), low=1)  # numpy integers are integers
  for bad, words in [(True, "integer >= 1"), (2.0, "integer >= 1"), (0, "integer >= 1")]:
    with pytest.raises(ConfigError, match=f"'a.n'.*{words}"):
      checks.integer("a.n", bad, low=1)
  with pytest.raises(ConfigError, match=r"in 1\.\.5, got 6"):
    checks.integer("a.n", 6, 1, 5)
  checks.integers("a.ns", (1, 2, 3), 1)
  for bad in [(), (1, True), (1, 0)]:
    with pytest.raises(ConfigError, match="non-empty list of integers"):
      checks.integers("a.ns", bad, 1)


def test_positive_boolean_and_choice():
  checks.positive("a.x", 0.5)
  for bad in (0, -1.0, True, "1"):
    with pytest.raises(ConfigError, match="number > 0"):
      checks.positive("a.x", bad)
  checks.boolean("a.b", False)
  with pytest.raises(ConfigError, match="must be a bool, got 0"):
    checks.boolean("a.b", 0)
  checks.choice("a.c", "mlp", ("mlp", "transformer"))
  with pytest.raises(ConfigError, match="unknown 'mpl'; allowed: mlp, transformer"):
    checks.choice("a.c", "mpl", ("mlp", "transformer"))


def test_integer_multiple_of():
  checks.integer("a.n", 4, low=4, multiple_of=2)
  checks.integer("a.n", np.int64(6), low=4, multiple_of=2)
  for bad in (5, 2, 4.0, True):
    with pytest.raises(ConfigError, match=rf"'a.n'.*integer >= 4, a multiple of 2, got {bad!r}"):
      checks.integer("a.n", bad, low=4, multiple_of=2)


def test_number_bounds_are_inclusive_unless_open():
  checks.number("a.x", 0, 0, 1)  # an int is a number
  checks.number("a.x", 1.0, 0, 1)
  checks.number("a.x", np.float32(0.5), 0, 1, low_open=True, high_open=True)
  checks.number("a.x", -3.5)  # no bounds: any real number
  cases = [  # (value, low, high, low_open, high_open, the bound in the message)
      (1.0, 0, 1, False, True, r"in \[0, 1\)"), (0.0, 0, 1, True, False, r"in \(0, 1\]"),
      (0, 0, 1, True, True, r"in \(0, 1\)"), (-1e-9, 0, None, False, False, ">= 0"),
      (0.0, 0, None, True, False, "> 0"), (1, None, 1, False, True, "< 1"),
      (1.5, None, 1, False, False, "<= 1"), (2.0, 0, 1, False, False, r"in \[0, 1\]")]
  for value, low, high, low_open, high_open, bound in cases:
    with pytest.raises(ConfigError, match=rf"'a.x'.*must be a number {bound}, got {value!r}"):
      checks.number("a.x", value, low, high, low_open=low_open, high_open=high_open)
  for bad in (True, False, np.bool_(True), "0.5", None, float("nan"), 1 + 0j):
    with pytest.raises(ConfigError, match="must be a number"):
      checks.number("a.x", bad, 0, 1)


def test_positive_is_number_above_zero():
  checks.positive("a.x", np.int32(1))
  checks.positive("a.x", 1e-12)
  for bad in (0.0, False, float("nan")):
    with pytest.raises(ConfigError, match=r"'a.x'.*must be a number > 0"):
      checks.positive("a.x", bad)


def test_numbers_each_in_bounds_and_non_empty_unless_allowed():
  checks.numbers("a.xs", (0.0, 1, np.float64(0.5)), 0, 1)
  checks.numbers("a.xs", [], allow_empty=True)
  with pytest.raises(ConfigError, match=r"'a.xs'.*non-empty list of numbers > 0, got \(\)"):
    checks.numbers("a.xs", (), 0, low_open=True)
  for bad in [(0.5, 0.0), (0.5, True), (0.5, "1"), "0.5", 0.5]:
    with pytest.raises(ConfigError, match=r"'a.xs'.*list of numbers > 0, got"):
      checks.numbers("a.xs", bad, 0, low_open=True, allow_empty=True)
  with pytest.raises(ConfigError, match=r"in \[0, 1\], got \(0.5, 1.5\)"):
    checks.numbers("a.xs", (0.5, 1.5), 0, 1)


def test_integers_refuse_a_string_or_a_scalar():
  for bad in ("12", 3):
    with pytest.raises(ConfigError, match=rf"non-empty list of integers >= 1, got {bad!r}"):
      checks.integers("a.ns", bad, 1)


def test_choices_each_allowed_and_non_empty_unless_allowed():
  checks.choices("a.cs", ("mlp", "mlp"), ("mlp", "transformer"))
  checks.choices("a.cs", (), ("mlp",), allow_empty=True)
  with pytest.raises(ConfigError, match=r"'a.cs'.*non-empty list, each one of: mlp; got \(\)"):
    checks.choices("a.cs", (), ("mlp",))
  with pytest.raises(ConfigError, match="'a.cs'.*list, each one of: mlp; got 'mlp'"):
    checks.choices("a.cs", "mlp", ("mlp",), allow_empty=True)  # a string is not a list of names
  with pytest.raises(ConfigError, match="'a.cs'.*unknown 'mpl'; allowed: mlp, transformer"):
    checks.choices("a.cs", ["mlp", "mpl"], ("mlp", "transformer"))
