"""One training step of one run of the scaling experiment (the engine scans, lifts and jits it:
training/chunk.py)."""

import jax
import ml_collections
import optax

from compgen_jax import rng
from compgen_jax.scaling import batches
from compgen_jax.scaling import state as run_state_lib
from compgen_jax.scaling.state import RunState
from compgen_jax.tasks import registry as families
from compgen_jax.training import optim


def train_batch(state: RunState, bits_T: jax.Array, cfg: ml_collections.ConfigDict):
  """The batch of training tasks for the state's current step (from the `train` stream)."""
  key = rng.step_key(rng.stream(run_state_lib.run_key(state), "train"), state.step)
  split = state.task["split"]
  return batches.draw_batch(state, key, split.train_idx, split.n_train, cfg.train.batch_size,
                            bits_T, cfg)


def update(state: RunState, batch, cfg: ml_collections.ConfigDict):
  """One AdamW step on `batch`; returns the new state and metrics."""
  family = families.get(cfg.task.family)
  # Training's token order comes from the train stream, never from evaluation's default.
  key_train = rng.step_key(rng.stream(run_state_lib.run_key(state), "train"), state.step)

  def loss_fn(params):
    order_key = rng.stream(key_train, batches.ORDER_STREAM)
    pred, _ = batches.predict(params, state, batch, cfg, key=order_key)
    return family.loss(pred, batch)

  (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
  opt_state = state.opt_state
  opt_state.hyperparams["learning_rate"] = state.hparams["learning_rate"] * optim.lr_factor(
      state.step, cfg.optim, cfg.train.num_steps)
  updates, opt_state = optim.optimizer(cfg.optim).update(grads, opt_state, state.params)
  params = optax.apply_updates(state.params, updates)
  metrics = {f"train/{k}": v for k, v in metrics.items()}
  metrics["train/grad_norm"] = optax.tree.norm(grads)
  metrics["train/lr"] = opt_state.hyperparams["learning_rate"]
  new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state)
  return new_state, metrics


def train_step(state: RunState, bits_T: jax.Array, cfg: ml_collections.ConfigDict):
  """One step: draw this step's batch on the device, then update."""
  return update(state, train_batch(state, bits_T, cfg), cfg)
