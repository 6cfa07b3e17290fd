"""Evaluator registry: name -> (state, bits_T, cfg) -> {metric: scalar}, for one run.

Each evaluator draws its tasks and inputs from a fixed key of its own stream (never the training
stream), so every evaluation of a run sees the same tasks and the numbers are comparable over steps.
"""

import functools

import jax
import jax.numpy as jnp
import ml_collections

from compgen_jax import rng
from compgen_jax.tasks import registry as families
from compgen_jax.training import state as state_lib
from compgen_jax.training import step as step_lib
from compgen_jax.training.state import RunState


def _evaluate_on(state: RunState, bits_T, cfg, stream: str, which: str) -> dict:
  family = families.get(cfg.task.family)
  split = state.task["split"]
  idx_T, n = (split.train_idx, split.n_train) if which == "train" else (split.ood_idx, split.n_ood)
  key = rng.stream(state_lib.run_key(state), stream)
  batch = step_lib.draw_batch(state, key, idx_T, jnp.maximum(n, 1), cfg.train.eval_tasks,
                              bits_T, cfg)
  pred, _ = step_lib.predict(state.params, state, batch, cfg)
  _, metrics = family.loss(pred, batch)
  # A split without held-out tasks has no OOD score.
  return {k: jnp.where(n > 0, v, jnp.nan) for k, v in metrics.items()}


def evaluate_id(state, bits_T, cfg) -> dict:
  """In-distribution: fresh draws of training tasks from the `test` stream."""
  return {f"id/{k}": v for k, v in _evaluate_on(state, bits_T, cfg, "test", "train").items()}


def evaluate_ood(state, bits_T, cfg) -> dict:
  """Held-out combinations (compositional generalization) from the `ood` stream."""
  return {f"ood/{k}": v for k, v in _evaluate_on(state, bits_T, cfg, "ood", "ood").items()}


REGISTRY = {"id": evaluate_id, "ood": evaluate_ood}


def make_evaluate(cfg: ml_collections.ConfigDict, names=None):
  """jit(vmap over runs) of the named evaluators (default: cfg.train.evaluators)."""
  names = tuple(names or cfg.train.evaluators)

  def evaluate(state, bits_T):
    out = {}
    for name in names:
      out.update(REGISTRY[name](state, bits_T, cfg))
    return out

  return jax.jit(jax.vmap(functools.partial(evaluate), in_axes=(0, None)))
