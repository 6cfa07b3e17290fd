"""Splits: disjoint and exhaustive, every (slot, attribute, value) trained (checked with Python
sets, independently of split.covered), the non-compositional one misses exactly one concept."""

import itertools

import jax
import numpy as np
import pytest

from compgen_jax.images import scenes, split
from compgen_jax.types import ConfigError

jax.config.update("jax_numpy_rank_promotion", "raise")


def _geo(grid=(1, 2), num_shapes=3, num_colours=4):
  cfg = scenes.default_config()
  cfg.update(dict(grid=grid, num_shapes=num_shapes, num_colours=num_colours))
  return scenes.geometry(cfg)


def _concepts(combos, geo):
  """{(slot, attr, value)} of the combinations (decoded by hand: base S*C digits)."""
  out = set()
  for idx in combos:
    for k in range(geo.num_slots):
      digit = int(idx) // (geo.num_shapes * geo.num_colours) ** k % (
          geo.num_shapes * geo.num_colours)
      out |= {(k, 0, digit // geo.num_colours), (k, 1, digit % geo.num_colours)}
  return out


ALL = lambda geo: {(k, a, v) for k in range(geo.num_slots) for a, n in
                   enumerate((geo.num_shapes, geo.num_colours)) for v in range(n)}


@pytest.mark.parametrize("coverage, grid", itertools.product((0.0625, 0.25, 0.5), ((1, 2), (2, 2))))
def test_random_split_is_disjoint_exhaustive_and_covers_every_concept(coverage, grid):
  geo = _geo(grid)
  s = split.host_split(np.array([3, 7], np.uint32), coverage, "random", geo, 1000)
  train, ood = s.train_idx[:s.n_train], s.ood_idx[:s.n_ood]
  assert s.train_idx.shape == s.ood_idx.shape == (geo.num_combos,)
  assert len(set(train)) == len(train) == round(coverage * geo.num_combos)
  assert not set(train) & set(ood)
  assert set(train) | set(ood) == set(range(geo.num_combos))
  assert _concepts(train, geo) == ALL(geo)


def test_split_is_a_function_of_the_key_and_coverage():
  geo = _geo()
  a = split.host_split(np.array([1, 2], np.uint32), 0.25, "random", geo, 100)
  b = split.host_split(np.array([1, 2], np.uint32), 0.25, "random", geo, 100)
  c = split.host_split(np.array([1, 3], np.uint32), 0.25, "random", geo, 100)
  np.testing.assert_array_equal(a.train_idx, b.train_idx)
  assert set(a.train_idx[:a.n_train]) != set(c.train_idx[:c.n_train])


def test_non_compositional_split_never_trains_one_concept():
  geo = _geo()
  s = split.host_split(np.array([5, 9], np.uint32), 0.25, "non_compositional", geo, 1000)
  train, ood = s.train_idx[:s.n_train], s.ood_idx[:s.n_ood]
  missing = ALL(geo) - _concepts(train, geo)
  assert len(missing) == 1
  (k, a, v), = missing
  attrs = split.attributes(geo)
  assert set(np.flatnonzero(attrs[:, k, a] == v)) <= set(ood)
  assert set(train) | set(ood) == set(range(geo.num_combos)) and not set(train) & set(ood)


@pytest.mark.parametrize("strategy, coverage", [("random", 0.01), ("random", 1.0),
                                                ("random", 0.0), ("nope", 0.5)])
def test_impossible_split_names_the_field(strategy, coverage):
  field = "split.strategy" if strategy == "nope" else "split.coverage"
  with pytest.raises(ConfigError, match=field):
    split.validate(strategy, (coverage,), _geo())


def test_unlucky_coverage_fails_after_max_retries():
  geo = _geo(num_shapes=4, num_colours=4)  # 4 combinations cannot often cover 4 + 4 values
  with pytest.raises(ConfigError, match="split.coverage"):
    split.host_split(np.array([0, 1], np.uint32), 4 / 256, "random", geo, 1)
