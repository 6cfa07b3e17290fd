"""The optimiser every family trains with (AdamW, decay on matrices, learning rate and weight
decay injected so they can differ per run and step) and its learning-rate schedule."""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import ml_collections
import optax

from compgen_jax import checks
from compgen_jax.types import ConfigError

SCHEDULES = ("constant", "warmup_cosine")


def matrices(params):
  """The default decay mask: every leaf with more than one axis."""
  return jax.tree.map(lambda p: p.ndim > 1, params)


def optimizer(cfg: ml_collections.ConfigDict,
              decay_mask: Callable = matrices) -> optax.GradientTransformation:
  """AdamW with decay where `decay_mask(params)` is True (default: matrices); lr / wd injected
  so they can differ per run and step."""
  # `mask` is static: inject_hyperparams treats any callable argument as a schedule of the step
  # count, which would turn the mask into `False` and switch weight decay off everywhere.
  return optax.inject_hyperparams(optax.adamw, static_args=("mask",))(
      learning_rate=cfg.learning_rate, weight_decay=cfg.weight_decay, b1=cfg.b1, b2=cfg.b2,
      mask=decay_mask)


def lr_factor(step: jax.Array, cfg: ml_collections.ConfigDict, num_steps: int) -> jax.Array:
  """Multiplier of the base learning rate at `step` (constant or warmup-cosine)."""
  if cfg.schedule == "constant":
    return jnp.ones((), jnp.float32)
  sched = optax.warmup_cosine_decay_schedule(
      0.0, 1.0, warmup_steps=cfg.warmup_steps, decay_steps=num_steps, end_value=cfg.end_factor)
  return sched(step)


def validate_schedule(optim: ml_collections.ConfigDict, num_steps: int) -> None:
  """The learning-rate schedule and Adam settings of `optim` (every family's)."""
  checks.choice("optim.schedule", optim.schedule, SCHEDULES)
  if optim.schedule == "warmup_cosine" and not 0 <= optim.warmup_steps < num_steps:
    raise ConfigError("optim.warmup_steps", f"must be in [0, train.num_steps = {num_steps}) "
                      f"for warmup_cosine, got {optim.warmup_steps}")
  for name in ("b1", "b2"):
    checks.number(f"optim.{name}", optim[name], 0, 1, high_open=True)
  # The final learning rate as a fraction of the peak.
  checks.number("optim.end_factor", optim.end_factor, 0, 1)
