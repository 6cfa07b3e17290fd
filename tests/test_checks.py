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
