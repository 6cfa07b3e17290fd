"""One training step, and the jitted chunk that vmaps it over runs and scans it over steps."""

import functools

import jax
import jax.numpy as jnp
import ml_collections
import optax

from compgen_jax import rng
from compgen_jax.encodings import registry as encodings
from compgen_jax.students import registry as students
from compgen_jax.tasks import hyperteacher, supports
from compgen_jax.tasks import registry as families
from compgen_jax.training import state as state_lib
from compgen_jax.training.state import RunState


def draw_batch(state: RunState, key: jax.Array, idx_T: jax.Array, n: jax.Array, num_tasks: int,
               bits_T: jax.Array, cfg: ml_collections.ConfigDict):
  """`num_tasks` tasks drawn from the first `n` entries of `idx_T`, with their data (O(1) in T)."""
  key_idx, key_data = jax.random.split(key)
  idx_B = supports.sample_indices(key_idx, idx_T, n, num_tasks)
  return batch_for_bits(state, bits_T[idx_B], key_data, cfg)


def batch_for_bits(state: RunState, bits_B: jax.Array, key: jax.Array,
                   cfg: ml_collections.ConfigDict):
  """Data of the tasks given as module bitmasks (also used for subsets outside the table)."""
  return batch_for_khot(state, hyperteacher.khot_from_bits(bits_B, cfg.task.num_modules), key,
                        cfg)


def batch_for_khot(state: RunState, khot_BxM: jax.Array, key: jax.Array,
                   cfg: ml_collections.ConfigDict):
  """Data of the tasks given as k-hot rows [B, M], with few-shot context when the encoding
  needs it."""
  family = families.get(cfg.task.family)
  num_shots = cfg.encoding.num_shots if encodings.get(cfg.encoding.name).needs_context else 0
  return family.sample_batch(state.task["teacher"], khot_BxM, key, cfg.task, num_shots)


# Stream of a sequence encoding's random token order (see predict).
ORDER_STREAM = "encoding_order"


def predict(params, state: RunState, batch, cfg: ml_collections.ConfigDict,
            key: jax.Array | None = None):
  """Student predictions and activations for a batch: student(phi(z), x).

  `key` draws a sequence encoding's token order (vector encodings ignore it); by default it is
  the ORDER_STREAM of the run key folded with state.step, so evaluation is deterministic.
  """
  _, _, out_dim, _ = state_lib.dims(cfg)
  enc = encodings.get(cfg.encoding.name)
  if enc.is_sequence and key is None:
    key = rng.step_key(rng.stream(state_lib.run_key(state), ORDER_STREAM), state.step)
  phi = encodings.encode(cfg.encoding.name, state.task["encoding"], batch.z, batch.context, key)
  return students.apply_student(cfg.student, params, phi, batch.x, out_dim,
                                state_lib.vocab_size(cfg))


def train_batch(state: RunState, bits_T: jax.Array, cfg: ml_collections.ConfigDict):
  """The batch of training tasks for the state's current step (from the `train` stream)."""
  key = rng.step_key(rng.stream(state_lib.run_key(state), "train"), state.step)
  split = state.task["split"]
  return draw_batch(state, key, split.train_idx, split.n_train, cfg.train.batch_size, bits_T,
                    cfg)


def update(state: RunState, batch, cfg: ml_collections.ConfigDict):
  """One AdamW step on `batch`; returns the new state and metrics."""
  family = families.get(cfg.task.family)
  # Training's token order comes from the train stream, never from evaluation's default.
  key_train = rng.step_key(rng.stream(state_lib.run_key(state), "train"), state.step)

  def loss_fn(params):
    pred, _ = predict(params, state, batch, cfg, key=rng.stream(key_train, ORDER_STREAM))
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
