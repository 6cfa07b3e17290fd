"""One training step, and the jitted chunk that scans it over steps for every run (vmapped, or
one run after another on a CPU)."""

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


STRATEGIES = ("auto", "vmap", "map")


def runs_one_after_another() -> bool:
  """The rule behind strategy "auto": on a single CPU device the runs of a chunk go one after
  another, elsewhere they are vmapped. XLA:CPU runs a vmapped run's matmuls as batched dots,
  slower per FLOP than one run's plain dots (benchmarks/throughput.py: 8 vmapped runs 0.5-0.9x of
  one run's run-steps/s at widths 128-1024), while an accelerator fills its cores with the batch.
  Sharded over several devices the runs stay vmapped (each device steps its own shard)."""
  return jax.default_backend() == "cpu" and jax.device_count() == 1


def over_runs(chunk_one_run, strategy: str = "auto"):
  """(state, bits_T) -> out of one run, lifted to stacked runs [R]: vmap, or "map" (lax.map over
  the run axis with the whole chunk inside, so each run is the one-run program and nothing is
  sliced or re-stacked per step or layer)."""
  if strategy not in STRATEGIES:
    raise ValueError(f"unknown strategy {strategy!r}; allowed: {', '.join(STRATEGIES)}")
  if strategy == "map" or (strategy == "auto" and runs_one_after_another()):
    return lambda states, bits_T: jax.lax.map(lambda s: chunk_one_run(s, bits_T), states)
  return jax.vmap(chunk_one_run, in_axes=(0, None))


def make_train_chunk(cfg: ml_collections.ConfigDict, length: int, strategy: str = "auto"):
  """jit(runs of scan over `length` steps): (states, bits_T) -> (states, metrics, ok).

  The runs are vmapped or stepped one after another (over_runs; `strategy` "auto" picks by
  backend: runs_one_after_another). metrics are stacked [runs, length]; ok [runs] says loss and
  parameters stayed finite. The state buffers are donated: the chunk updates them in place.
  """
  chunk = functools.partial(_chunk_one_run, cfg=cfg, length=length)
  return jax.jit(over_runs(chunk, strategy), donate_argnums=0)
