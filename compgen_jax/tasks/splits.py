"""A run's split as fixed-shape index lists (`Split`), built on the host from the run's key by a
support strategy (supports.py), and O(1) sampling of tasks from it on the device."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from compgen_jax.tasks import combinatorics as cb
from compgen_jax.tasks.supports import split_masks, validate
from compgen_jax.types import Array


class Split(NamedTuple):
  """Fixed-shape split (every family's: task tables and image combinations): the first n_train
  of train_idx are the training tasks (ascending for task tables; the image splits keep the
  order their key drew), the rest repeat the first one (padded); likewise ood_idx / n_ood (all
  zeros, unused, when n_ood == 0). Train and OOD are disjoint; n_train + n_ood < T for connected
  / disconnected. Draws read the first n entries only (sample_indices)."""

  train_idx: Array  # int32 [T]
  n_train: Array  # int32 []
  ood_idx: Array  # int32 [T]
  n_ood: Array  # int32 []


def padded(idx: np.ndarray, T: int) -> np.ndarray:
  """int32 [T]: idx, then copies of its first entry (zeros when it is empty)."""
  out = np.full(T, idx[0] if idx.size else 0, np.int32)
  out[: idx.size] = idx
  return out


def split_from_mask(ood_T: np.ndarray, train_T: np.ndarray | None = None) -> Split:
  """The numpy Split of an OOD mask and a disjoint training mask (default: the rest)."""
  ood_T = np.asarray(ood_T, bool)
  train_T = ~ood_T if train_T is None else np.asarray(train_T, bool)
  if (train_T & ood_T).any():
    raise ValueError("training and OOD tasks overlap")
  train, ood = np.flatnonzero(train_T), np.flatnonzero(ood_T)
  T = ood_T.size
  return Split(padded(train, T), np.int32(train.size), padded(ood, T), np.int32(ood.size))


def split(key: jax.Array, frac_ood: Array | float, *, strategy: str, M: int, K: int,
          max_retries: int = 1000) -> Split:
  """The Split of one run, computed on the host; works under jit and vmap (keys and frac_ood).

  The split of a seed is a function of that seed's key (and frac_ood) only, never of the batch it
  is vmapped in. Errors raised in the callback are opaque: validate / split_masks on the host
  first (with the config's frac_ood: the float32 one that arrives here gives the same split).
  """
  validate(strategy, M, K, frac_ood if isinstance(frac_ood, float | int) else None)
  T = cb.num_tasks(M, K)
  vec, scalar = jax.ShapeDtypeStruct((T,), jnp.int32), jax.ShapeDtypeStruct((), jnp.int32)

  def host(seed_data, frac):
    return host_split(seed_data, np.asarray(frac)[()], strategy=strategy, M=M, K=K,
                      max_retries=max_retries)

  return jax.pure_callback(host, Split(vec, scalar, vec, scalar), jax.random.key_data(key),
                           jnp.asarray(frac_ood), vmap_method="sequential")


def host_split(seed_data: np.ndarray, frac_ood, *, strategy: str, M: int, K: int,
               max_retries: int = 1000) -> Split:
  """The numpy Split that `split` computes for a key's data (no callback: a program that takes
  splits as inputs has no host callback, so the persistent compilation cache can keep it)."""
  train, ood = split_masks(strategy, seed_data, M, K, frac_ood, max_retries)
  return split_from_mask(ood, train)


def sample_indices(key: jax.Array, idx_T: Array, n: Array, B: int) -> Array:
  """int32 [B]: uniform draws with replacement among the first n entries of idx_T (O(1) in T)."""
  return idx_T[jax.random.randint(key, (B,), 0, n)]
