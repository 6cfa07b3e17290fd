"""Linear encodings: identity and a fixed random orthogonal map."""

import functools

import jax
import jax.numpy as jnp
import ml_collections

from compgen_jax.types import Array, PRNGKey, PyTree


def identity_init(key: PRNGKey, M: int, cfg: ml_collections.ConfigDict) -> PyTree:
  """No parameters."""
  del key, M, cfg
  return {}


def identity_apply(params: PyTree, z_BxM: Array, context_BxCxF: Array | None) -> Array:
  """phi(z) = z."""
  del params, context_BxCxF
  return jnp.asarray(z_BxM, jnp.float32)


def orthogonal_init(key: PRNGKey, M: int, cfg: ml_collections.ConfigDict) -> PyTree:
  """A Haar-random orthogonal Q: QR of a Gaussian with the signs of diag(R) folded into Q."""
  del cfg
  return {"q": _haar_orthogonal(key, M)}


@functools.partial(jax.jit, static_argnums=1)
def _haar_orthogonal(key: PRNGKey, M: int) -> Array:
  g_MxM = jax.random.normal(key, (M, M), jnp.float32)
  q_MxM, r_MxM = jnp.linalg.qr(g_MxM)
  # Without the sign fix QR's sign convention biases the distribution away from Haar.
  sign_M = jnp.where(jnp.diagonal(r_MxM) >= 0, 1.0, -1.0).astype(jnp.float32)
  return q_MxM * sign_M[None, :]


def orthogonal_apply(params: PyTree, z_BxM: Array, context_BxCxF: Array | None) -> Array:
  """phi(z) = Q z for every row of z."""
  del context_BxCxF
  return jnp.asarray(z_BxM, jnp.float32) @ params["q"].T


def square_dim(M: int, cfg: ml_collections.ConfigDict, context_dim: int) -> int:
  """Encodings that keep the latent's size: E = M."""
  del cfg, context_dim
  return M
