"""Task-support strategies: invariants of the train / OOD masks and errors (the jax-side split:
test_splits.py)."""

import itertools
import math
import time
from fractions import Fraction

import jax
import numpy as np
import pytest

from compgen_jax.tasks import combinatorics as cb
from compgen_jax.tasks import splits
from compgen_jax.tasks import supports as sp
from compgen_jax.types import ConfigError

jax.config.update("jax_numpy_rank_promotion", "raise")

SEED = np.array([0, 7], np.uint32)
# (strategy, M, K, frac_ood) that every strategy accepts.
CASES = {
    "random": (16, 3, 0.25), "equal": (16, 3, 0.25), "connected": (16, 2, 0.25),
    "disconnected": (16, 2, 0.25), "pseudo_random_disconnected": (16, 3, 0.25),
    "non_compositional": (16, 3, 0.25), "popular_modules": (16, 3, 0.25),
    "unpopular_modules": (16, 3, 0.25),
}
VALID = ["random", "equal", "connected", "popular_modules", "unpopular_modules"]
RING = {"connected": "disconnected", "disconnected": "connected"}


def _masks(strategy, seed=SEED, frac=None, max_retries=1000):
  M, K, default_frac = CASES[strategy]
  return sp.split_masks(strategy, seed, M, K, default_frac if frac is None else frac,
                        max_retries)


def _mask(strategy, seed=SEED, frac=None, max_retries=1000):
  """The held-out (not trained) mask."""
  return ~_masks(strategy, seed, frac, max_retries)[0]


def test_registry_names():
  assert set(sp.STRATEGIES) == set(CASES)


@pytest.mark.parametrize("strategy", list(CASES))
def test_split_disjoint_and_exhaustive_except_ring(strategy):
  M, K, _ = CASES[strategy]
  train_T, ood_T = _masks(strategy)
  s = splits.split_from_mask(ood_T, train_T)
  T = cb.num_tasks(M, K)
  assert s.train_idx.shape == s.ood_idx.shape == (T,) and s.train_idx.dtype == np.int32
  train, ood = s.train_idx[: s.n_train], s.ood_idx[: s.n_ood]
  np.testing.assert_array_equal(train, np.flatnonzero(train_T))
  np.testing.assert_array_equal(ood, np.flatnonzero(ood_T))
  assert not np.intersect1d(train, ood).size
  assert (s.train_idx[s.n_train:] == train[0]).all() and (s.ood_idx[s.n_ood:] == ood[0]).all()
  # connected / disconnected leave out the other's training tasks; every other split is exhaustive.
  rest = ~_masks(RING[strategy])[0] if strategy in RING else np.ones(T, bool)
  np.testing.assert_array_equal(np.sort(np.concatenate([train, ood])),
                                np.flatnonzero(rest | train_T))
  with pytest.raises(ValueError, match="overlap"):
    splits.split_from_mask(ood_T, train_T | ood_T)


@pytest.mark.parametrize("strategy", ["random", "equal", "pseudo_random_disconnected"])
@pytest.mark.parametrize("frac", [0.25, 0.5, 0.8, 0.9])
def test_held_out_count(strategy, frac):
  M, K, _ = CASES[strategy]
  assert int(_mask(strategy, frac=frac).sum()) == cb.num_tasks(M, K) - _n_train(M, K, frac)


def test_non_compositional_holds_out_last_module():
  ood = _mask("non_compositional")
  assert ood.sum() == 121
  np.testing.assert_array_equal(ood, cb.task_table(16, 3)[:, 15])


@pytest.mark.parametrize("strategy", VALID)
def test_valid_supports_are_compositional_and_connected(strategy):
  M, K, _ = CASES[strategy]
  train = ~_mask(strategy)
  assert cb.is_compositional(train, M, K) and cb.is_connected(train, M, K)


def test_broken_supports():
  assert not cb.is_compositional(~_mask("non_compositional"), 16, 3)
  for strategy in ["disconnected", "pseudo_random_disconnected"]:
    M, K, _ = CASES[strategy]
    assert cb.is_compositional(~_mask(strategy), M, K)
    assert not cb.is_connected(~_mask(strategy), M, K)


def test_ring_supports_exact():
  train = ~_mask("connected")
  assert train.sum() == 16 * 3  # singletons, (i, i+1), (i, i+2)
  assert (cb.module_usage(train, 16, 2) == 5).all()
  train = ~_mask("disconnected")
  assert train.sum() == 2 * (8 + 28)  # singletons and pairs inside each half


def _ring_common_ood(M):
  """The tasks neither ring support trains on, enumerated directly: pairs across the two halves
  whose ring distance exceeds 2 (connected trains the pairs at distance 1 and 2)."""
  expected = set()
  for a, b in itertools.combinations(range(M), 2):
    across = (a < M // 2) != (b < M // 2)
    if across and min(b - a, M - (b - a)) > 2:
      expected.add(cb.module_bits([a, b]))
  return expected


@pytest.mark.parametrize("M", [6, 8, 16])
def test_ring_supports_score_on_one_common_ood_set(M):
  bits = cb.task_bits(M, 2)
  expected = _ring_common_ood(M)
  key = jax.random.key(M)
  for strategy in RING:
    train_T, ood_T = sp.split_masks(strategy, jax.random.key_data(key), M, 2, 0.25)
    assert set(bits[ood_T].tolist()) == expected
    assert not (train_T & ood_T).any()
    s = jax.jit(lambda k, st=strategy: splits.split(k, 0.25, strategy=st, M=M, K=2))(key)
    assert int(s.n_ood) == len(expected) and int(s.n_train) == int(train_T.sum())
    assert set(bits[np.asarray(s.ood_idx)[: int(s.n_ood)]].tolist()) == expected
  # connected's training tasks beyond the singletons lie across the halves: neither set there.
  assert int(s.n_train) + int(s.n_ood) < bits.size


# (M, K, frac_ood) of the task-support sweep and around it; the top-ups range from 0 to 165.
BUDGET_POINTS = [(16, 3, 0.25), (16, 3, 0.5), (16, 3, 0.75), (16, 3, 0.8), (12, 4, 0.5),
                 (24, 2, 0.9), (10, 3, 0.3), (32, 2, 0.75)]


def _n_train(M, K, frac):
  """T - int(T * frac_ood), frac_ood as the decimal written (the paper's count)."""
  T = sum(math.comb(M, k) for k in range(1, K + 1))
  return T - math.floor(T * Fraction(str(frac)))


@pytest.mark.parametrize("M,K,frac", BUDGET_POINTS)
def test_popular_modules_fill_the_training_budget(M, K, frac):
  table = cb.task_table(M, K)
  n_train = _n_train(M, K, frac)
  n = max(n for n in range(1, M + 1) if table[:, :n].any(1).sum() <= n_train)
  train = ~_mask_at("popular_modules", M, K, frac)
  assert train.sum() == n_train
  core = table[:, :n].any(1)
  assert train[core].all()  # every task of the n popular modules
  assert table[train & ~core, n].all()  # the top-up: tasks of module n only
  assert cb.is_compositional(train, M, K) and cb.is_connected(train, M, K)


@pytest.mark.parametrize("M,K,frac", BUDGET_POINTS)
def test_unpopular_modules_fill_the_training_budget(M, K, frac):
  table = cb.task_table(M, K)
  n_train = _n_train(M, K, frac)
  T_of = lambda m: sum(math.comb(m, k) for k in range(1, K + 1))
  c = max(c for c in range(2, M + 1) if T_of(c) + M - c <= n_train)
  train = ~_mask_at("unpopular_modules", M, K, frac)
  assert train.sum() == n_train
  core, rare = table[:, :c], table[:, c:]
  assert train[~rare.any(1)].all()  # every subset of the core
  assert (rare[train].sum(1) <= 1).all()  # no training task has two rare modules
  for r in range(c + 1, M):  # rare modules past the top-up one: {0, r} and nothing else
    np.testing.assert_array_equal(np.flatnonzero(train & table[:, r]),
                                  cb.index_of([cb.module_bits([0, r])], M, K))
  # Module c: {0, c}, then its first tasks with core modules in table order, up to the budget.
  with_c = np.flatnonzero(table[:, c] & core.any(1) & ~rare[:, 1:].any(1))
  first = with_c[with_c != cb.index_of([cb.module_bits([0, c])], M, K)[0]]
  extra = n_train - T_of(c) - (M - c)
  want = np.union1d(cb.index_of([cb.module_bits([0, c])], M, K), first[:extra])
  np.testing.assert_array_equal(np.flatnonzero(train & table[:, c]), want)
  assert cb.is_compositional(train, M, K) and cb.is_connected(train, M, K)


def _mask_at(strategy, M, K, frac):
  return ~sp.split_masks(strategy, SEED, M, K, frac)[0]


@pytest.mark.parametrize("frac", [0.25, 0.6, 0.9])
def test_equal_balances_usage_and_keeps_hotness(frac):
  M, K = 16, 3
  rng = np.random.default_rng(3)
  before = sp._random_ood(rng, cb.num_tasks(M, K), int(cb.num_tasks(M, K) * frac))
  hotness = cb.task_table(M, K).sum(1)
  counts = np.bincount(hotness[~before], minlength=K + 1)
  after = sp._balance(rng, M, K, before.copy())
  usage = cb.module_usage(~after, M, K)
  assert usage.max() - usage.min() <= 1
  np.testing.assert_array_equal(np.bincount(hotness[~after], minlength=K + 1), counts)
  usage = cb.module_usage(~_mask("equal", frac=frac), M, K)
  assert usage.max() - usage.min() <= 1


@pytest.mark.parametrize("strategy", ["random", "equal", "pseudo_random_disconnected"])
def test_determinism(strategy):
  again = sp.STRATEGIES[strategy](np.random.default_rng(SEED), *CASES[strategy], 1000)
  np.testing.assert_array_equal(_mask(strategy), again)
  assert not np.array_equal(_mask(strategy), _mask(strategy, seed=np.array([0, 8], np.uint32)))


def test_split_masks_cached_and_read_only():
  train, ood = _masks("random")
  assert _masks("random")[0] is train
  # The config's float and the device's float32 are one split (one cache entry).
  assert _masks("random", frac=np.float32(0.25))[1] is ood
  for mask in (train, ood):
    with pytest.raises(ValueError):
      mask[0] = True


@pytest.mark.parametrize("strategy,M,K,frac,field", [
    ("nope", 16, 3, 0.25, "task.support"),
    ("random", 0, 1, 0.25, "task.num_modules"),
    ("random", 16, 0, 0.25, "task.max_hotness"),
    ("random", 16, 17, 0.25, "task.max_hotness"),
    ("random", 16, 3, 1.0, "task.frac_ood"),
    ("random", 16, 3, 0.99999999, "task.frac_ood"),  # 1.0 as the float32 runs carry
    ("random", 16, 3, -0.1, "task.frac_ood"),
    ("random", 16, 1, 0.25, "task.max_hotness"),
    ("equal", 28, 6, 0.999999, "task.frac_ood"),
    ("random", 16, 3, 0.99, "task.frac_ood"),
    ("connected", 16, 3, 0.25, "task.max_hotness"),
    ("connected", 7, 2, 0.25, "task.num_modules"),
    ("disconnected", 4, 2, 0.25, "task.num_modules"),
    ("pseudo_random_disconnected", 16, 3, 0.1, "task.frac_ood"),
    ("popular_modules", 16, 3, 0.9, "task.frac_ood"),
    ("popular_modules", 16, 1, 0.25, "task.max_hotness"),
    ("unpopular_modules", 16, 3, 0.995, "task.frac_ood"),
    ("unpopular_modules", 16, 1, 0.25, "task.max_hotness"),
])
def test_bad_requests(strategy, M, K, frac, field):
  with pytest.raises(ConfigError) as validated:
    sp.validate(strategy, M, K, frac)
  assert validated.value.field == field
  with pytest.raises(ConfigError) as drawn:
    sp.split_masks(strategy, SEED, M, K, frac)
  assert drawn.value.field == field


def test_retries_exhausted():
  T = cb.num_tasks(28, 6)
  frac = (T - 6 + 0.5) / T  # 6 training tasks: valid in principle, never in practice
  with pytest.raises(ConfigError, match="no valid split found in 20 tries") as err:
    sp.split_masks("random", SEED, 28, 6, frac, max_retries=20)
  assert err.value.field == "task.frac_ood"
  with pytest.raises(ConfigError, match="max_retries"):
    sp.split_masks("random", SEED, 16, 3, 0.25, max_retries=0)


@pytest.mark.parametrize("strategy,frac", [("random", 0.99), ("equal", 0.99), ("equal", 0.9999)])
def test_scaling_m28_k6(strategy, frac):
  M, K = 28, 6
  cb.task_table(M, K), cb.index_of([1], M, K)  # build the shared tables outside the timing
  start = time.perf_counter()
  train, _ = sp.split_masks(strategy, SEED, M, K, frac)
  assert time.perf_counter() - start < 5.0
  assert train.sum() == _n_train(M, K, frac)
  assert cb.is_compositional(train, M, K) and cb.is_connected(train, M, K)


# The paper's sweeps: data (random support) and scaling law (equal support), frac_ood as written.
DATA_FRACS = ("0.125", "0.25", "0.5", "0.75", "0.875", "0.9", "0.95", "0.98", "0.99")
LAW_FRACS = ("0.9", "0.95", "0.98", "0.99", "0.995", "0.9975", "0.999", "0.9995", "0.99975",
             "0.9999", "0.99995", "0.999975", "0.99999", "0.999995", "0.999999")
PAPER_GRID = ([(M, K, f) for M in (8, 16, 24, 32) for K in range(2, 8) for f in DATA_FRACS]
              + [(M, K, f) for M in range(10, 29, 2) for K in (4, 5, 6) for f in LAW_FRACS])


def test_split_sizes_are_exact_on_paper_grids():
  """The config's float, the device's float32 and its float64 widening all give int(T * frac)
  with frac the decimal written (float32(0.9) = 0.899999976 would hold out one task fewer)."""
  for M, K, text in PAPER_GRID:
    T = sum(math.comb(M, k) for k in range(1, K + 1))
    n_ood = math.floor(T * Fraction(text))
    for frac in (float(text), np.float32(text), float(np.float32(text))):
      assert cb.split_sizes(M, K, frac) == (T, n_ood, T - n_ood), (M, K, text, frac)


def _accepted(M, K, text):
  try:
    sp.validate("random", M, K, float(text))
    sp.split_masks("random", SEED, M, K, float(text))  # random retries can still run out
  except ConfigError:
    return False
  return True
