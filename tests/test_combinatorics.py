"""Task table enumeration, bitmask lookup and the compositional / connected checks."""

import itertools
import math

import jax
import numpy as np
import pytest

from compgen_jax.scaling import runs
from compgen_jax.scaling import train as scaling_train
from compgen_jax.tasks import combinatorics as cb
from compgen_jax.tasks import latents
from compgen_jax.types import ConfigError
from tests.helpers import load_config

jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.mark.parametrize("M,K,T", [(16, 3, 696), (28, 6, 499_177), (5, 5, 31), (4, 1, 4)])
def test_num_tasks(M, K, T):
  assert cb.num_tasks(M, K) == T
  assert cb.task_table(M, K).shape == (T, M)
  assert cb.task_bits(M, K).shape == (T,)


def test_table_order_and_read_only():
  M, K = 6, 3
  table = cb.task_table(M, K)
  expected = [c for k in range(1, K + 1) for c in itertools.combinations(range(M), k)]
  assert [tuple(np.flatnonzero(row)) for row in table] == expected
  assert cb.task_table(M, K) is table  # cached
  with pytest.raises(ValueError):
    table[0, 0] = False


@pytest.mark.parametrize("M,K", [(1, 1), (9, 9), (12, 5), (32, 2)])
def test_members_follow_itertools_order(M, K):
  expected = [c for k in range(1, K + 1) for c in itertools.combinations(range(M), k)]
  members = cb.task_members(M, K)
  assert members.shape == (len(expected), K)
  assert [tuple(sorted(set(row.tolist()))) for row in members] == expected
  sizes = [len(c) for c in expected]
  assert all(row[k:].tolist() == [row[0]] * (K - k) for row, k in zip(members, sizes, strict=True))


def test_bits_and_index_of_round_trip():
  M, K = 16, 3
  table, bits = cb.task_table(M, K), cb.task_bits(M, K)
  np.testing.assert_array_equal(bits, table @ (np.int64(1) << np.arange(M)))
  assert np.unique(bits).size == bits.size
  np.testing.assert_array_equal(cb.index_of(bits, M, K), np.arange(bits.size))
  missing = [0, cb.module_bits(range(K + 1)), np.int64(1) << M]
  np.testing.assert_array_equal(cb.index_of(missing, M, K), [-1, -1, -1])


def test_masks_and_counts():
  M, K = 10, 3
  table = cb.task_table(M, K)
  for n in range(1, M + 1):
    touching = cb.touching(M, K, range(n))
    np.testing.assert_array_equal(touching, table[:, :n].any(1))
    assert touching.sum() == cb.num_touching(M, K, n)
    np.testing.assert_array_equal(cb.within(M, K, range(n)), ~table[:, n:].any(1))
  for s in range(1, M // 2 + 1):
    cross = table[:, :s].any(1) & table[:, s:].any(1)
    assert cross.sum() == cb.num_cross(M, K, s)


def test_module_usage_matches_table():
  M, K = 12, 4
  train = np.random.default_rng(0).random(cb.num_tasks(M, K)) < 0.3
  np.testing.assert_array_equal(cb.module_usage(train, M, K), cb.task_table(M, K)[train].sum(0))


def _mask(M, K, subsets):
  mask = np.zeros(cb.num_tasks(M, K), bool)
  mask[cb.index_of([cb.module_bits(s) for s in subsets], M, K)] = True
  return mask


def test_checks_on_small_supports():
  M, K = 4, 2
  two_islands = _mask(M, K, [(0, 1), (2, 3)])
  assert cb.is_compositional(two_islands, M, K)
  assert not cb.is_connected(two_islands, M, K)
  bridged = _mask(M, K, [(0, 1), (2, 3), (1, 2)])
  assert cb.is_compositional(bridged, M, K) and cb.is_connected(bridged, M, K)
  missing = _mask(M, K, [(0, 1), (1, 2)])
  assert not cb.is_compositional(missing, M, K) and not cb.is_connected(missing, M, K)
  assert not cb.is_compositional(np.zeros(cb.num_tasks(M, K), bool), M, K)


def _connected_reference(train, M, K):
  """B^T B > 0 as an adjacency matrix, closed under reachability by repeated squaring."""
  B = cb.task_table(M, K)[train].astype(np.int64)
  reach = (B.T @ B > 0) | np.eye(M, dtype=bool)
  for _ in range(math.ceil(math.log2(M)) + 1):
    reach = (reach.astype(np.int64) @ reach.astype(np.int64)) > 0
  return bool(reach.all())


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("p", [0.01, 0.03, 0.1])
def test_is_connected_matches_adjacency_reference(seed, p):
  M, K = 12, 3
  train = np.random.default_rng(seed).random(cb.num_tasks(M, K)) < p
  assert cb.is_connected(train, M, K) == _connected_reference(train, M, K)
  assert cb.is_compositional(train, M, K) == bool(cb.task_table(M, K)[train].any(0).all())


def test_budget_helpers():
  assert cb.split_sizes(16, 3, 0.25) == (696, 174, 522)
  assert cb.min_train_tasks(28, 6) == 6 and cb.min_train_tasks(1, 1) == 1
  n = cb.popular_count(16, 3, 0.25)
  assert cb.num_touching(16, 3, n) <= 522 < cb.num_touching(16, 3, n + 1)
  c = cb.core_size(16, 3, 0.25)
  assert cb.num_tasks(c, 3) + 16 - c <= 522 < cb.num_tasks(c + 1, 3) + 15 - c
  s = cb.cut_size(16, 3, 0.25)
  assert cb.num_cross(16, 3, s) <= 174 < cb.num_cross(16, 3, s + 1)
  with pytest.raises(ConfigError, match="max_hotness"):
    cb.require_ring(16, 3)


def _cfg(M, K):
  return load_config("hyperteacher", "tiny", **{"task.num_modules": M, "task.max_hotness": K})


def test_device_bits_reach_module_31():
  """uint32 task bits on the device, and k-hot rows equal to the table's, module 31 included."""
  M, K = 32, 3
  bits_T = scaling_train.task_bits(_cfg(M, K))
  assert bits_T.dtype == np.uint32 and int(bits_T[-1]) == (1 << 31) | (1 << 30) | (1 << 29)
  table = cb.task_table(M, K).astype(np.float32)
  assert table[:, 31].sum() == math.comb(31, 0) + math.comb(31, 1) + math.comb(31, 2)
  np.testing.assert_array_equal(np.asarray(latents.khot_from_bits(bits_T, M)), table)
  # int32 masks (the same bits, negative when bit 31 is set) read the same.
  as_int32 = np.asarray(bits_T).view(np.int32)
  assert (as_int32 < 0).sum() == table[:, 31].sum()
  np.testing.assert_array_equal(np.asarray(latents.khot_from_bits(as_int32, M)), table)


def test_runs_take_up_to_32_modules():
  runs.validate(_cfg(32, 2))
  with pytest.raises(ConfigError) as err:
    runs.validate(_cfg(33, 2))
  assert err.value.field == "task.num_modules" and "32" in str(err.value)
