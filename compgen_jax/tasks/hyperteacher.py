"""The hyperteacher task family: a teacher MLP whose weights are a z-weighted sum of modules.

W_l = sum_m z~_m Theta_m^l, b_l = sum_m z~_m beta_m^l with z~ = z / sqrt(K); a_l = relu(a_{l-1} W_l
+ b_l), a_0 = x; y = a_L Omega. Everything is a pure function of explicit keys.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from compgen_jax import checks, rng
from compgen_jax.tasks import latents

WEIGHT_SCALE = float(np.sqrt(3.0))  # variance-scaling factor of Theta and Omega (reference)
BIAS_MAX = 0.5  # beta ~ U[0, BIAS_MAX)


class Batch(NamedTuple):
  """One batch of tasks. context is [B, C, I+O] fresh pairs of the same task, or None."""
  khot: jax.Array     # [B, M] float 0/1
  z: jax.Array        # [B, M] weighted latent
  x: jax.Array        # [B, N, I]
  y: jax.Array        # [B, N, O]
  context: jax.Array | None


def layer_dims(cfg: ml_collections.ConfigDict) -> list[tuple[int, int]]:
  """(d_in, d_out) of each hidden layer of the teacher."""
  dims = [cfg.input_dim] + [cfg.hidden_dim] * cfg.num_hidden_layers
  return list(zip(dims[:-1], dims[1:], strict=True))


def init(key: jax.Array, cfg: ml_collections.ConfigDict) -> dict:
  """Teacher modules: theta[l] [M, d_in, d_out], beta[l] [M, d_out], omega [H, O].

  Weights and biases come from separate streams (the reference shared one key).
  """
  # Variance sqrt(3) / fan_in with fan_in = d_in of ONE module: axis 0 (modules) is a batch axis,
  # not part of the fan-in (without it fan_in = M * d_in and the teacher is nearly linear).
  init_theta = jax.nn.initializers.variance_scaling(
      WEIGHT_SCALE, "fan_in", "truncated_normal", in_axis=-2, out_axis=-1, batch_axis=0)
  init_omega = jax.nn.initializers.variance_scaling(WEIGHT_SCALE, "fan_in", "truncated_normal")
  key_w, key_b = rng.stream(key, "teacher_weights"), rng.stream(key, "teacher_biases")
  keys_w = jax.random.split(key_w, cfg.num_hidden_layers + 1)
  keys_b = jax.random.split(key_b, cfg.num_hidden_layers)
  M = cfg.num_modules
  theta = tuple(init_theta(keys_w[l], (M, d_in, d_out)) for l, (d_in, d_out) in
                enumerate(layer_dims(cfg)))
  beta = tuple(jax.random.uniform(keys_b[l], (M, d_out), maxval=BIAS_MAX) for l, (_, d_out) in
               enumerate(layer_dims(cfg)))
  omega = init_omega(keys_w[-1], (cfg.hidden_dim, cfg.output_dim))
  return {"theta": theta, "beta": beta, "omega": omega}


def apply(params: dict, z_BxM: jax.Array, x_BxNxI: jax.Array, max_hotness: int) -> jax.Array:
  """Teacher outputs y [B, N, O] for latents z and inputs x."""
  zt_BxM = z_BxM / np.sqrt(max_hotness)
  a = x_BxNxI
  for theta, beta in zip(params["theta"], params["beta"], strict=True):
    w_BxIxH = jnp.einsum("bm,mih->bih", zt_BxM, theta)
    b_BxH = zt_BxM @ beta
    a = jax.nn.relu(jnp.einsum("bni,bih->bnh", a, w_BxIxH) + b_BxH[:, None, :])
  return a @ params["omega"]


def sample_batch(params: dict, khot_BxM: jax.Array, key: jax.Array,
                 cfg: ml_collections.ConfigDict, num_shots: int = 0) -> Batch:
  """Latent weights, inputs x ~ U[-1, 1] and teacher outputs for each task (fresh draws)."""
  key_z, key_x, key_c = (rng.stream(key, n) for n in ("data", "train", "fewshot"))
  B = khot_BxM.shape[0]
  z = latents.sample_latent(key_z, khot_BxM, cfg.weights)
  x = jax.random.uniform(key_x, (B, cfg.num_samples, cfg.input_dim), minval=-1.0, maxval=1.0)
  y = apply(params, z, x, cfg.max_hotness)
  context = None
  if num_shots:
    xc = jax.random.uniform(key_c, (B, num_shots, cfg.input_dim), minval=-1.0, maxval=1.0)
    context = jnp.concatenate([xc, apply(params, z, xc, cfg.max_hotness)], axis=-1)
  return Batch(khot_BxM, z, x, y, context)


def default_config() -> ml_collections.ConfigDict:
  """The `task` config subtree (paper defaults)."""
  return ml_collections.ConfigDict(dict(
      family="hyperteacher", num_modules=16, max_hotness=3, frac_ood=0.25, support="random",
      max_retries=1000, weights="discrete", input_dim=16, hidden_dim=16, output_dim=16,
      num_hidden_layers=1, num_samples=16))


def validate(cfg: ml_collections.ConfigDict) -> None:
  """Hyperteacher-specific checks (shapes and names), before anything compiles."""
  checks.choice("task.weights", cfg.weights, latents.WEIGHT_KINDS)
  for name in ("input_dim", "hidden_dim", "output_dim", "num_hidden_layers"):
    checks.integer(f"task.{name}", cfg[name], low=1)
  checks.integer("task.num_samples", cfg.num_samples, low=2)  # R^2 needs two samples per task
