"""Losses and per-batch metrics of the regression (hyperteacher) family."""

import jax
import jax.numpy as jnp

_EPS = 1e-12  # guards a task whose outputs are constant over its samples


def mse(pred_BxNxO: jax.Array, y_BxNxO: jax.Array) -> jax.Array:
  return jnp.mean((pred_BxNxO - y_BxNxO) ** 2)


def r2_per_task(pred_BxNxO: jax.Array, y_BxNxO: jax.Array) -> jax.Array:
  """Per-task R^2 [B]: mean over samples and outputs of 1 - (yhat - y)^2 / var_task_output."""
  var_BxO = jnp.var(y_BxNxO, axis=1)
  ratio = (pred_BxNxO - y_BxNxO) ** 2 / (var_BxO[:, None, :] + _EPS)
  return 1.0 - jnp.mean(ratio, axis=(1, 2))


def r2(pred_BxNxO: jax.Array, y_BxNxO: jax.Array) -> jax.Array:
  """The paper's R^2: mean over tasks, samples and outputs."""
  return jnp.mean(r2_per_task(pred_BxNxO, y_BxNxO))


def regression_loss(pred_BxNxO: jax.Array, batch) -> tuple[jax.Array, dict]:
  """MSE loss and {loss, r2} metrics."""
  loss = mse(pred_BxNxO, batch.y)
  return loss, {"loss": loss, "r2": r2(pred_BxNxO, batch.y)}
