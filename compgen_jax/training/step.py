"""One training step, and the jitted chunk that vmaps it over runs and scans it over steps."""

import functools

import jax
import jax.numpy as jnp
import ml_collections
import optax

from compgen_jax import batches, rng
from compgen_jax import run_state as run_state_lib
from compgen_jax.run_state import RunState
from compgen_jax.tasks import registry as families
from compgen_jax.training import state as state_lib


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
  opt_state.hyperparams["learning_rate"] = state.hparams["learning_rate"] * state_lib.lr_factor(
      state.step, cfg.optim, cfg.train.num_steps)
  updates, opt_state = state_lib.optimizer(cfg.optim).update(grads, opt_state, state.params)
  params = optax.apply_updates(state.params, updates)
  metrics = {f"train/{k}": v for k, v in metrics.items()}
  metrics["train/grad_norm"] = optax.tree.norm(grads)
  metrics["train/lr"] = opt_state.hyperparams["learning_rate"]
  new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state)
  return new_state, metrics


def train_step(state: RunState, bits_T: jax.Array, cfg: ml_collections.ConfigDict):
  """One step: draw this step's batch on the device, then update."""
  return update(state, train_batch(state, bits_T, cfg), cfg)


def all_finite(tree) -> jax.Array:
  leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)
            if jnp.issubdtype(x.dtype, jnp.floating)]
  return jnp.all(jnp.stack(leaves))


def _chunk_one_run(state: RunState, bits_T: jax.Array, cfg, length: int):
  step = functools.partial(train_step, bits_T=bits_T, cfg=cfg)
  state, metrics = jax.lax.scan(lambda s, _: step(s), state, length=length)
  finite = all_finite(state.params) & jnp.all(jnp.isfinite(metrics["train/loss"]))
  return state, metrics, finite


def make_train_chunk(cfg: ml_collections.ConfigDict, length: int):
  """jit(vmap over runs of scan over `length` steps): (states, bits_T) -> (states, metrics, ok).

  metrics are stacked [runs, length]; ok [runs] says loss and parameters stayed finite.
  The state buffers are donated: the chunk updates them in place.
  """
  chunk = functools.partial(_chunk_one_run, cfg=cfg, length=length)
  return jax.jit(jax.vmap(chunk, in_axes=(0, None)), donate_argnums=0)
