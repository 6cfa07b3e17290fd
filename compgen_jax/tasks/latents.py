"""The task latent z of every family: the k-hot row of a task's bitmask and the weights of its
active modules, in the paper's three kinds (not a family: the hyperteacher, the preference grid
world, the batches and the theorem draw their tasks' z here)."""

import jax
import jax.numpy as jnp
import numpy as np

from compgen_jax import checks

WEIGHT_KINDS = ("discrete", "continuous", "khot")
DISCRETE_WEIGHTS = np.linspace(0.5, 1.0, 6)  # {0.5, 0.6, ..., 1.0}


def sample_latent(key: jax.Array, khot_BxM: jax.Array, kind: str) -> jax.Array:
  """Weights of the active modules (zeros elsewhere), as the paper's three kinds."""
  checks.choice("task.weights", kind, WEIGHT_KINDS)
  if kind == "khot":
    return khot_BxM
  if kind == "discrete":
    w = jax.random.choice(key, jnp.asarray(DISCRETE_WEIGHTS, jnp.float32), khot_BxM.shape)
    return w * khot_BxM
  e = jax.random.exponential(key, khot_BxM.shape) * khot_BxM  # "continuous"
  w = e / (e.sum(-1, keepdims=True) + 1.0)
  return (0.5 * w + 0.5) * khot_BxM


def khot_from_bits(bits_B: jax.Array, num_modules: int) -> jax.Array:
  """k-hot rows [B, M] from task bitmasks (bit m set = module m active), read as uint32."""
  bits_B = jnp.asarray(bits_B).astype(jnp.uint32)  # int32 masks keep their bits (bit 31 too)
  shifts_M = jnp.arange(num_modules, dtype=jnp.uint32)
  return ((bits_B[:, None] >> shifts_M[None, :]) & 1).astype(jnp.float32)
