"""Interval shuffle (the paper's "Algorithm 1, Interval Shift"): permute bins of [0, 1]."""

import functools

import jax
import jax.numpy as jnp
import ml_collections

from compgen_jax.types import Array, PRNGKey, PyTree


def interval_shuffle_init(key: PRNGKey, M: int, cfg: ml_collections.ConfigDict) -> PyTree:
  """A random permutation of the num_bins bins; keep_zeros rides along as an array.

  apply gets no config, so the flag lives in params (a bool scalar; vmaps like any leaf).
  """
  del M
  return {"perm": _permutation(key, cfg.num_bins),
          "keep_zeros": jnp.asarray(cfg.keep_zeros, jnp.bool_)}


@functools.partial(jax.jit, static_argnums=1)
def _permutation(key: PRNGKey, num_bins: int) -> Array:
  return jax.random.permutation(key, num_bins).astype(jnp.int32)


def bin_index(v: Array, num_bins: int) -> Array:
  """floor(v * num_bins) clipped to [0, num_bins - 1]: 1.0 falls in the last bin."""
  return jnp.clip(jnp.floor(v * num_bins), 0, num_bins - 1).astype(jnp.int32)


def interval_shuffle_apply(params: PyTree, z_BxM: Array, context_BxCxF: Array | None) -> Array:
  """v -> (perm[b] + frac) / num_bins with b the bin of v and frac in [0, 1) its offset.

  A bijection of [0, 1]: [0, 1) is cut into bins moved as rigid blocks and 1.0 is kept.
  """
  del context_BxCxF
  perm = params["perm"]
  num_bins = perm.shape[0]
  v = jnp.asarray(z_BxM, jnp.float32)
  u = v * num_bins
  b = bin_index(v, num_bins)
  # Offsets within the bin in bin units, from the same u as b so that b and frac agree at edges;
  # the clip keeps rounding from pushing a point into the next target bin.
  frac = jnp.clip(u - b.astype(jnp.float32), 0.0, 1.0)
  target = perm[b].astype(jnp.float32)
  upper = jnp.nextafter(target + 1.0, target)
  out = jnp.minimum(target + frac, upper) / num_bins
  out = jnp.where(v >= 1.0, 1.0, out)
  return jnp.where(params["keep_zeros"] & (v == 0.0), 0.0, out)
