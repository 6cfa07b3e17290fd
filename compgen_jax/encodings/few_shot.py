"""Few-shot encoding: the task is given by C fresh (x, y) pairs instead of z."""

import jax.numpy as jnp
import ml_collections

from compgen_jax.types import Array, PRNGKey, PyTree


def few_shot_init(key: PRNGKey, M: int, cfg: ml_collections.ConfigDict) -> PyTree:
  """No parameters: the task family builds the context."""
  del key, M, cfg
  return {}


def few_shot_apply(params: PyTree, z_BxM: Array, context_BxCxF: Array | None) -> Array:
  """Flatten the context [B, C, F] (F = I + O) to [B, C*F]; z is not used."""
  del params
  if context_BxCxF is None:
    raise ValueError(
        "encoding 'few_shot' needs context: an array [B, num_shots, I + O] of fresh (x, y) "
        "pairs supplied by the task family (Encoding.needs_context is True); got None")
  if context_BxCxF.ndim != 3 or context_BxCxF.shape[0] != z_BxM.shape[0]:
    raise ValueError(
        f"encoding 'few_shot' expects context [B, C, F] with B = {z_BxM.shape[0]} "
        f"(the batch of z); got shape {tuple(context_BxCxF.shape)}")
  B, C, F = context_BxCxF.shape
  return jnp.asarray(context_BxCxF, jnp.float32).reshape(B, C * F)


def few_shot_dim(M: int, cfg: ml_collections.ConfigDict, context_dim: int) -> int:
  """E = num_shots * context_dim (context_dim = I + O)."""
  del M
  return cfg.num_shots * context_dim
