"""Losses and per-batch metrics: regression (hyperteacher), masked classification (preference)."""

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


def masked_classification_loss(pred_BxNxA: jax.Array, batch) -> tuple[jax.Array, dict]:
  """Cross-entropy over the valid steps (batch.mask) and {loss, acc, acc_all} metrics.

  acc is the accuracy over valid steps; acc_all the fraction of tasks whose every valid step is
  right (a whole demonstration reproduced).
  """
  mask_BxN = batch.mask.astype(jnp.float32)
  count = jnp.maximum(mask_BxN.sum(), 1.0)
  logp_BxNxA = jax.nn.log_softmax(pred_BxNxA, axis=-1)
  nll_BxN = -jnp.take_along_axis(logp_BxNxA, batch.y[..., None], axis=-1)[..., 0]
  loss = (nll_BxN * mask_BxN).sum() / count
  right_BxN = jnp.argmax(pred_BxNxA, axis=-1) == batch.y
  acc = (right_BxN * mask_BxN).sum() / count
  acc_all = jnp.mean(jnp.all(right_BxN | ~batch.mask.astype(bool), axis=-1))
  return loss, {"loss": loss, "acc": acc, "acc_all": acc_all}
