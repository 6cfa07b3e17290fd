"""Hypernetwork student: phi(z) -> LayerNorm -> Dense -> all weights of a one-hidden-layer MLP on x.

The modular baseline the paper argues is unnecessary: task information enters only through the
generated weights (W1 [I, H], b1 [H], W2 [H, O], b2 [O]), never as an input to the MLP on x.
"""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np


def truncated_normal_std(bound: float) -> float:
  """Standard deviation of N(0, 1) truncated to (-bound, bound)."""
  pdf = math.exp(-bound**2 / 2) / math.sqrt(2 * math.pi)
  return math.sqrt(1.0 - 2.0 * bound * pdf / math.erf(bound / math.sqrt(2)))


# The reference's VarianceScaledKernel (compscale/model/hypernetwork.py) scales a generated matrix
# by sqrt(1 / fan_in) / TRUNC_STD, as if its entries were N(0, 1) draws truncated to (-2, 2).
TRUNC_STD = truncated_normal_std(2.0)


def num_generated(x_dim: int, hidden: int, out_dim: int) -> int:
  """P: the number of generated weights and biases."""
  return x_dim * hidden + hidden + hidden * out_dim + out_dim


class HyperNetwork(nn.Module):
  """Returns predictions and (generated weights, hidden pre-ReLU, readout)."""
  hidden: int
  out_dim: int
  layernorm: bool = True

  @nn.compact
  def __call__(self, phi_BxE: jax.Array, x_BxNxI: jax.Array):
    B, N, I = x_BxNxI.shape
    H, O = self.hidden, self.out_dim
    # LayerNorm (the paper's) is scale-invariant: phi and 2 phi generate the same weights.
    h_BxE = nn.LayerNorm(name="ln")(phi_BxE) if self.layernorm else phi_BxE
    g_BxP = nn.Dense(num_generated(I, H, O), name="generator")(h_BxE)
    w1, b1_BxH, w2, b2_BxO = jnp.split(g_BxP, np.cumsum([I * H, H, H * O]), axis=-1)
    # Generated entries have unit scale; the fan-in scaling keeps activations O(1). Biases are
    # used as generated, as in the reference.
    w1_BxIxH = w1.reshape(B, I, H) / (np.sqrt(I) * TRUNC_STD)
    w2_BxHxO = w2.reshape(B, H, O) / (np.sqrt(H) * TRUNC_STD)
    h_BxNxH = jnp.einsum("bni,bih->bnh", x_BxNxI, w1_BxIxH) + b1_BxH[:, None, :]
    y_BxNxO = jnp.einsum("bnh,bho->bno", nn.relu(h_BxNxH), w2_BxHxO) + b2_BxO[:, None, :]
    g_BxNxP = jnp.broadcast_to(g_BxP[:, None, :], (B, N, g_BxP.shape[-1]))
    return y_BxNxO, (g_BxNxP, h_BxNxH, y_BxNxO)


def _module(cfg: ml_collections.ConfigDict, out_dim: int) -> HyperNetwork:
  return HyperNetwork(hidden=cfg.hidden, out_dim=out_dim, layernorm=cfg.layernorm)


def init(key: jax.Array, enc_dim: int, x_dim: int, out_dim: int,
         cfg: ml_collections.ConfigDict) -> dict:
  """Parameters of the LayerNorm and the weight generator (enc_dim -> P)."""
  phi = jnp.zeros((1, enc_dim), jnp.float32)
  x = jnp.zeros((1, 1, x_dim), jnp.float32)
  return _module(cfg, out_dim).init(key, phi, x)["params"]


def apply(params: dict, phi_BxE: jax.Array, x_BxNxI: jax.Array, out_dim: int,
          cfg: ml_collections.ConfigDict) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Predictions [B, N, O] and {generated: [B, N, P], hidden: [B, N, H], readout: [B, N, O]}
  (generated is the same for every sample of a task)."""
  y, acts = _module(cfg, out_dim).apply({"params": params}, phi_BxE, x_BxNxI)
  return y, dict(zip(("generated", "hidden", "readout"), acts, strict=True))
