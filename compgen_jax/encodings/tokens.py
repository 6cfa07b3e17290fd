"""The reference "language" encoding: interleaved module ids and quantized weights."""

import jax.numpy as jnp
import ml_collections

from compgen_jax.types import Array, PRNGKey, PyTree


def tokens_init(key: PRNGKey, M: int, cfg: ml_collections.ConfigDict) -> PyTree:
  """No parameters: the token vector is a fixed function of z."""
  del key, M, cfg
  return {}


def tokens_apply(params: PyTree, z_BxM: Array, context_BxCxF: Array | None) -> Array:
  """[1, w_1, 2, w_2, ..., M, w_M] with w_k = int(10 z_k) + M + 1, as float32 (fed raw)."""
  del params, context_BxCxF
  z_BxM = jnp.asarray(z_BxM, jnp.float32)
  B, M = z_BxM.shape
  # int() truncates; z >= 0 so floor is the same and stays a float op (jittable, no cast).
  w_BxM = jnp.floor(10.0 * z_BxM) + (M + 1)
  # Module ids are 1-based, as in the reference.
  ids_BxM = jnp.broadcast_to(jnp.arange(1, M + 1, dtype=jnp.float32)[None, :], (B, M))
  return jnp.stack([ids_BxM, w_BxM], axis=-1).reshape(B, 2 * M)


def tokens_dim(M: int, cfg: ml_collections.ConfigDict, context_dim: int) -> int:
  """E = 2M: one id and one weight token per module."""
  del cfg, context_dim
  return 2 * M
