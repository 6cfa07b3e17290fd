"""Task-support strategies: invariants of the held-out masks, errors, and the jax-side split."""

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax.tasks import combinatorics as cb
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


def _mask(strategy, seed=SEED, frac=None, max_retries=1000):
  M, K, default_frac = CASES[strategy]
  return sp.ood_mask(strategy, seed, M, K, default_frac if frac is None else frac, max_retries)


def test_registry_names():
  assert set(sp.STRATEGIES) == set(CASES)


@pytest.mark.parametrize("strategy", list(CASES))
def test_split_disjoint_and_exhaustive(strategy):
  M, K, _ = CASES[strategy]
  s = sp.split_from_mask(_mask(strategy))
  T = cb.num_tasks(M, K)
  assert s.train_idx.shape == s.ood_idx.shape == (T,) and s.train_idx.dtype == np.int32
  train, ood = s.train_idx[: s.n_train], s.ood_idx[: s.n_ood]
  np.testing.assert_array_equal(np.sort(np.concatenate([train, ood])), np.arange(T))
  assert (s.train_idx[s.n_train:] == train[0]).all() and (s.ood_idx[s.n_ood:] == ood[0]).all()


@pytest.mark.parametrize("strategy", ["random", "equal", "pseudo_random_disconnected"])
@pytest.mark.parametrize("frac", [0.25, 0.5, 0.8, 0.9])
def test_held_out_count(strategy, frac):
  M, K, _ = CASES[strategy]
  assert abs(int(_mask(strategy, frac=frac).sum()) - int(cb.num_tasks(M, K) * frac)) <= 1


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


def test_unpopular_rare_modules_seen_once():
  M, K, frac = CASES["unpopular_modules"]
  c = cb.core_size(M, K, frac)
  usage = cb.module_usage(~_mask("unpopular_modules"), M, K)
  assert c >= 2 and (usage[c:] == 1).all() and (usage[:c] > 1).all()


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


def test_ood_mask_cached_and_read_only():
  ood = _mask("random")
  assert _mask("random") is ood
  with pytest.raises(ValueError):
    ood[0] = True


@pytest.mark.parametrize("strategy", ["random", "equal"])
def test_split_jit_vmap_matches_host(strategy):
  M, K, _ = CASES[strategy]
  keys = jax.random.split(jax.random.key(0), 3)
  fracs = jnp.array([0.25, 0.9])
  fn = lambda key, frac: sp.split(key, frac, strategy=strategy, M=M, K=K, max_retries=100)
  out = jax.jit(jax.vmap(jax.vmap(fn, (0, None)), (None, 0)))(keys, fracs)
  assert out.train_idx.shape == (2, 3, cb.num_tasks(M, K))
  for j, frac in enumerate([0.25, 0.9]):
    for i in range(3):
      ref = sp.split_from_mask(
          sp.ood_mask(strategy, jax.random.key_data(keys[i]), M, K, frac, 100))
      for got, want in zip(out, ref, strict=True):
        np.testing.assert_array_equal(np.asarray(got)[j, i], want)


def test_sample_indices_draws_training_tasks():
  s = sp.split(jax.random.key(1), 0.9, strategy="random", M=16, K=3, max_retries=100)
  draw = jax.jit(sp.sample_indices, static_argnums=3)
  idx = draw(jax.random.key(2), s.train_idx, s.n_train, 4096)
  assert idx.shape == (4096,) and idx.dtype == jnp.int32
  ood = sp.ood_mask("random", jax.random.key_data(jax.random.key(1)), 16, 3, 0.9, 100)
  assert not ood[np.asarray(idx)].any()
  assert np.unique(np.asarray(idx)).size == int(s.n_train)  # 4096 draws cover all 70 tasks


@pytest.mark.parametrize("strategy,M,K,frac,field", [
    ("nope", 16, 3, 0.25, "task.support"),
    ("random", 0, 1, 0.25, "task.num_modules"),
    ("random", 16, 0, 0.25, "task.max_hotness"),
    ("random", 16, 17, 0.25, "task.max_hotness"),
    ("random", 16, 3, 1.0, "task.frac_ood"),
    ("random", 16, 3, -0.1, "task.frac_ood"),
    ("random", 16, 1, 0.25, "task.max_hotness"),
    ("equal", 28, 6, 0.999999, "task.frac_ood"),
    ("random", 16, 3, 0.99, "task.frac_ood"),
    ("connected", 16, 3, 0.25, "task.max_hotness"),
    ("connected", 7, 2, 0.25, "task.num_modules"),
    ("disconnected", 4, 2, 0.25, "task.num_modules"),
    ("pseudo_random_disconnected", 16, 3, 0.1, "task.frac_ood"),
    ("popular_modules", 16, 3, 0.9, "task.frac_ood"),
    ("unpopular_modules", 16, 3, 0.995, "task.frac_ood"),
    ("unpopular_modules", 16, 1, 0.25, "task.max_hotness"),
])
def test_bad_requests(strategy, M, K, frac, field):
  with pytest.raises(ConfigError) as validated:
    sp.validate(strategy, M, K, frac)
  assert validated.value.field == field
  with pytest.raises(ConfigError) as drawn:
    sp.ood_mask(strategy, SEED, M, K, frac)
  assert drawn.value.field == field


def test_retries_exhausted():
  T = cb.num_tasks(28, 6)
  frac = (T - 6 + 0.5) / T  # 6 training tasks: valid in principle, never in practice
  with pytest.raises(ConfigError, match="no valid split found in 20 tries") as err:
    sp.ood_mask("random", SEED, 28, 6, frac, max_retries=20)
  assert err.value.field == "task.frac_ood"
  with pytest.raises(ConfigError, match="max_retries"):
    sp.ood_mask("random", SEED, 16, 3, 0.25, max_retries=0)


@pytest.mark.parametrize("strategy,frac", [("random", 0.99), ("equal", 0.99), ("equal", 0.9999)])
def test_scaling_m28_k6(strategy, frac):
  M, K = 28, 6
  cb.task_table(M, K), cb.index_of([1], M, K)  # build the shared tables outside the timing
  start = time.perf_counter()
  ood = sp.ood_mask(strategy, SEED, M, K, frac)
  assert time.perf_counter() - start < 5.0
  assert ood.sum() == int(cb.num_tasks(M, K) * frac)
  assert cb.is_compositional(~ood, M, K) and cb.is_connected(~ood, M, K)
