"""The jax-side split (tasks/splits.py): under jit and vmap it equals the host's, holds out
validation's n_ood on the paper's grids, and draws only training tasks, up to M=32, K=7."""

import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax.scaling import runs
from compgen_jax.scaling import train as scaling_train
from compgen_jax.tasks import combinatorics as cb
from compgen_jax.tasks import latents, splits
from compgen_jax.tasks import supports as sp
from tests.helpers import load_config
from tests.test_supports import CASES, PAPER_GRID, SEED, _accepted, _n_train

jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.mark.parametrize("strategy", ["random", "equal", "connected"])
def test_split_jit_vmap_matches_host(strategy):
  M, K, _ = CASES[strategy]
  keys = jax.random.split(jax.random.key(0), 3)
  fracs = jnp.array([0.25, 0.9])
  fn = lambda key, frac: splits.split(key, frac, strategy=strategy, M=M, K=K, max_retries=100)
  out = jax.jit(jax.vmap(jax.vmap(fn, (0, None)), (None, 0)))(keys, fracs)
  assert out.train_idx.shape == (2, 3, cb.num_tasks(M, K))
  for j, frac in enumerate([0.25, 0.9]):
    for i in range(3):
      train, ood = sp.split_masks(strategy, jax.random.key_data(keys[i]), M, K, frac, 100)
      for got, want in zip(out, splits.split_from_mask(ood, train), strict=True):
        np.testing.assert_array_equal(np.asarray(got)[j, i], want)


def test_sample_indices_draws_training_tasks():
  s = splits.split(jax.random.key(1), 0.9, strategy="random", M=16, K=3, max_retries=100)
  draw = jax.jit(splits.sample_indices, static_argnums=3)
  idx = draw(jax.random.key(2), s.train_idx, s.n_train, 4096)
  assert idx.shape == (4096,) and idx.dtype == jnp.int32
  train, _ = sp.split_masks("random", jax.random.key_data(jax.random.key(1)), 16, 3, 0.9, 100)
  assert train[np.asarray(idx)].all()
  assert np.unique(np.asarray(idx)).size == int(s.n_train)  # 4096 draws cover all 70 tasks


@pytest.mark.parametrize("M", sorted({M for M, _, _ in PAPER_GRID}))
def test_jit_split_has_the_validated_n_ood_on_paper_grids(M):
  """Every grid point validation accepts: the split built under jit from the float32 frac_ood
  holds out exactly validation's n_ood, and is the split validated on the host."""
  key = jax.random.wrap_key_data(jnp.asarray(SEED))
  for K in range(2, 8):
    points = [text for m, k, text in PAPER_GRID if (m, k) == (M, K) and _accepted(M, K, text)]
    if not points:
      continue
    build = jax.jit(lambda key, frac, K=K: splits.split(key, frac, strategy="random", M=M, K=K))
    for text in points:
      _, n_ood, n_train = cb.split_sizes(M, K, float(text))  # what validation checked
      s = build(key, jnp.float32(text))
      assert (int(s.n_ood), int(s.n_train)) == (n_ood, n_train), (M, K, text)
      train, ood = sp.split_masks("random", SEED, M, K, float(text))
      np.testing.assert_array_equal(np.asarray(s.ood_idx)[:n_ood], np.flatnonzero(ood))


def test_precompute_builds_the_splits_training_uses(monkeypatch):
  """runs.precompute_splits validates exactly the splits init_run's callback then uses (none is
  drawn twice) with validation's n_ood; at M=24, K=2 the float32 frac_ood (0.899999976 for 0.9)
  would hold out one task fewer."""
  cfg = load_config("hyperteacher", "tiny", **{"task.num_modules": 24, "seed": 9173,
                                               "sweep.frac_ood": (0.9, 0.75)})
  drawn = []
  strategy = sp.STRATEGIES["random"]
  monkeypatch.setitem(sp.STRATEGIES, "random", lambda *args: drawn.append(args) or strategy(*args))
  grid = runs.run_grid(cfg)
  runs.precompute_splits(cfg, grid)
  assert len(drawn) == len(grid) == 4
  states = scaling_train.make_init(cfg)(*runs.run_inputs(cfg, grid))
  assert len(drawn) == len(grid)  # every callback found its precomputed split
  n_ood = np.asarray(states.task["split"].n_ood)
  assert n_ood.tolist() == [math.floor(300 * Fraction(str(run["frac_ood"]))) for run in grid]
  assert n_ood.tolist() == [cb.split_sizes(24, 2, run["frac_ood"])[1] for run in grid]


def test_m32_k7_table_split_and_draws():
  """The paper's largest table (T = 4,514,872 at M=32, K=7): built in seconds, split under jit,
  and O(1) draws whose k-hot rows (module 31 included) are the drawn tasks'."""
  M, K = 32, 7
  bits = cb.task_bits(M, K)
  s = jax.jit(lambda key: splits.split(key, 0.9, strategy="random", M=M, K=K))(jax.random.key(5))
  assert bits.size == 4_514_872 and int(s.n_train) == _n_train(M, K, 0.9)
  idx = np.asarray(jax.jit(splits.sample_indices, static_argnums=3)(
      jax.random.key(6), s.train_idx, s.n_train, 4096))
  train, _ = sp.split_masks("random", jax.random.key_data(jax.random.key(5)), M, K, 0.9)
  assert train[idx].all()
  device_bits = jnp.asarray(bits.astype(np.uint32))[idx]
  khot = np.asarray(latents.khot_from_bits(device_bits, M))
  members = cb.task_members(M, K)[idx]
  assert all(set(np.flatnonzero(row)) == set(m) for row, m in zip(khot, members, strict=True))
  assert khot[:, 31].any()
