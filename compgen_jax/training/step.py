"""One training step, and the jitted chunk that scans it over steps for every run (vmapped, or
one run after another on a CPU)."""

import functools
import math

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


STRATEGIES = ("auto", "vmap", "map")
# "auto" maps runs one after another on a CPU when a run's largest weight matrix has at least this
# many entries (an MLP of width 128): below it each op is small, per-op overhead dominates and
# the vmapped program is faster (throughput.py, width 64: 8 vmapped runs 1.24x of one run, mapped
# 1.02x).
MAP_MIN_WEIGHTS = 128 * 128


def runs_one_after_another(params) -> bool:
  """The rule behind strategy "auto" for runs with stacked parameters `params` [R, ...]: one
  after another on a single CPU device when a run's largest weight has >= MAP_MIN_WEIGHTS
  entries, else vmapped. XLA:CPU runs vmapped runs' matmuls as batched dots, slower per FLOP than
  one run's plain dots (throughput.py: 8 vmapped runs 0.93x of one run at width 512, mapped
  1.01x), while an accelerator fills its cores with the batch. Sharded over several devices the
  runs stay vmapped (each device steps its own shard)."""
  largest = max(math.prod(a.shape[1:]) for a in jax.tree.leaves(params))
  return (jax.default_backend() == "cpu" and jax.device_count() == 1
          and largest >= MAP_MIN_WEIGHTS)


def over_runs(chunk_one_run, strategy: str):
  """(state, bits_T) -> out of one run, lifted to stacked runs [R]: "vmap", or "map" (lax.map
  over the run axis with the whole chunk inside, so each run is the one-run program and nothing
  is sliced or re-stacked per step or layer)."""
  if strategy == "map":
    return lambda states, bits_T: jax.lax.map(lambda s: chunk_one_run(s, bits_T), states)
  return jax.vmap(chunk_one_run, in_axes=(0, None))


def _check(strategy: str) -> None:
  if strategy not in STRATEGIES:
    raise ValueError(f"unknown strategy {strategy!r}; allowed: {', '.join(STRATEGIES)}")


def resolve(strategy: str, params) -> str:
  """The strategy to lift with ("vmap" or "map"); "auto" is runs_one_after_another(params)."""
  _check(strategy)
  if strategy == "auto":
    return "map" if runs_one_after_another(params) else "vmap"
  return strategy


def make_train_chunk(cfg: ml_collections.ConfigDict, length: int, strategy: str = "auto"):
  """jit(runs of scan over `length` steps): (states, bits_T) -> (states, metrics, ok).

  The runs are vmapped or stepped one after another (over_runs; "auto" picks by backend and
  size: runs_one_after_another). metrics are stacked [runs, length]; ok [runs] says loss and
  parameters stayed finite. The state buffers are donated: the chunk updates them in place.
  """
  _check(strategy)  # here, not when first traced
  chunk = functools.partial(_chunk_one_run, cfg=cfg, length=length)
  return jax.jit(lambda states, bits_T: over_runs(chunk, resolve(strategy, states.params))(
      states, bits_T), donate_argnums=0)
