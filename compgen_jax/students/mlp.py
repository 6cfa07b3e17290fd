"""MLP student on concat(phi(z), x): [Dense(width) -> ReLU] x depth -> Dense(out)."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections


class MLP(nn.Module):
  """Returns the prediction and the pre-ReLU output of every Dense layer."""
  widths: tuple[int, ...]
  out_dim: int

  @nn.compact
  def __call__(self, h_BxNxD: jax.Array) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    acts = []
    for i, width in enumerate(self.widths):
      h_BxNxD = nn.Dense(width, name=f"dense_{i}")(h_BxNxD)
      acts.append(h_BxNxD)
      h_BxNxD = nn.relu(h_BxNxD)
    y = nn.Dense(self.out_dim, name="readout")(h_BxNxD)
    acts.append(y)
    return y, tuple(acts)


def hidden_widths(cfg: ml_collections.ConfigDict) -> tuple[int, ...]:
  """Per-layer widths: cfg.widths when given, else depth x width."""
  widths = tuple(cfg.get("widths", ()) or ())
  return widths or (cfg.width,) * cfg.depth


def _module(cfg: ml_collections.ConfigDict, out_dim: int) -> MLP:
  return MLP(widths=hidden_widths(cfg), out_dim=out_dim)


def _inputs(phi_BxE: jax.Array, x_BxNxI: jax.Array) -> jax.Array:
  phi_BxNxE = jnp.broadcast_to(phi_BxE[:, None, :], x_BxNxI.shape[:2] + phi_BxE.shape[-1:])
  return jnp.concatenate([phi_BxNxE, x_BxNxI], axis=-1)


def init(key: jax.Array, enc_dim: int, x_dim: int, out_dim: int,
         cfg: ml_collections.ConfigDict) -> dict:
  """Parameters for inputs of size enc_dim + x_dim."""
  dummy = jnp.zeros((1, 1, enc_dim + x_dim), jnp.float32)
  return _module(cfg, out_dim).init(key, dummy)["params"]


def apply(params: dict, phi_BxE: jax.Array, x_BxNxI: jax.Array, out_dim: int,
          cfg: ml_collections.ConfigDict) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Predictions [B, N, out] and activations {layer name: [B, N, D]} (pre-ReLU)."""
  y, acts = _module(cfg, out_dim).apply({"params": params}, _inputs(phi_BxE, x_BxNxI))
  names = [f"dense_{i}" for i in range(len(hidden_widths(cfg)))] + ["readout"]
  return y, dict(zip(names, acts, strict=True))


def default_config() -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict(dict(name="mlp", width=1024, depth=4, widths=()))
