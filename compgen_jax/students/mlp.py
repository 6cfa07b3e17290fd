"""MLP student on concat(phi(z), x): [Dense(width) -> ReLU] x depth -> Dense(out).

The first layer's kernel is one [E + I, H] matrix (as a Dense on the concatenation), but it is
applied as phi(z) W_phi + x W_x: the task part is the same for every sample of a task, so it is
computed once per task instead of once per sample (B x E x H instead of B x N x E x H FLOPs).
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections


class TaskInputDense(nn.Module):
  """Dense(concat(phi, x)) with the same parameters as nn.Dense, with phi's part once per task."""
  features: int

  @nn.compact
  def __call__(self, phi_BxE: jax.Array, x_BxNxI: jax.Array) -> jax.Array:
    E, I = phi_BxE.shape[-1], x_BxNxI.shape[-1]
    kernel = self.param("kernel", nn.initializers.lecun_normal(), (E + I, self.features))
    bias = self.param("bias", nn.initializers.zeros_init(), (self.features,))
    task_BxH = phi_BxE @ kernel[:E] + bias[None, :]
    return x_BxNxI @ kernel[E:] + task_BxH[:, None, :]


class MLP(nn.Module):
  """Returns the prediction and the pre-ReLU output of every Dense layer."""
  widths: tuple[int, ...]
  out_dim: int

  @nn.compact
  def __call__(self, phi_BxE: jax.Array,
               x_BxNxI: jax.Array) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    acts = []
    h_BxNxD = None
    for i, width in enumerate(self.widths):
      if i == 0:
        h_BxNxD = TaskInputDense(width, name="dense_0")(phi_BxE, x_BxNxI)
      else:
        h_BxNxD = nn.Dense(width, name=f"dense_{i}")(h_BxNxD)
      acts.append(h_BxNxD)
      h_BxNxD = nn.relu(h_BxNxD)
    if h_BxNxD is None:  # no hidden layer: the readout is the layer that sees (phi, x)
      y = TaskInputDense(self.out_dim, name="readout")(phi_BxE, x_BxNxI)
    else:
      y = nn.Dense(self.out_dim, name="readout")(h_BxNxD)
    acts.append(y)
    return y, tuple(acts)


def hidden_widths(cfg: ml_collections.ConfigDict) -> tuple[int, ...]:
  """Per-layer widths of the `student.mlp` subsection: cfg.widths when given, else depth x
  width."""
  return tuple(cfg.widths) or (cfg.width,) * cfg.depth


def _module(cfg: ml_collections.ConfigDict, out_dim: int) -> MLP:
  return MLP(widths=hidden_widths(cfg), out_dim=out_dim)


def init(key: jax.Array, enc_dim: int, x_dim: int, out_dim: int,
         cfg: ml_collections.ConfigDict) -> dict:
  """Parameters for inputs of size enc_dim + x_dim."""
  phi, x = jnp.zeros((1, enc_dim), jnp.float32), jnp.zeros((1, 1, x_dim), jnp.float32)
  return _module(cfg, out_dim).init(key, phi, x)["params"]


def apply(params: dict, phi_BxE: jax.Array, x_BxNxI: jax.Array, out_dim: int,
          cfg: ml_collections.ConfigDict) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Predictions [B, N, out] and activations {layer name: [B, N, D]} (pre-ReLU)."""
  y, acts = _module(cfg, out_dim).apply({"params": params}, phi_BxE, x_BxNxI)
  names = [f"dense_{i}" for i in range(len(hidden_widths(cfg)))] + ["readout"]
  return y, dict(zip(names, acts, strict=True))
