"""Training the scaling experiment's runs (hyperteacher / preference): its family for the
engine (training/loop.py), whose one-run functions are init_run and train_step."""

import functools

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from compgen_jax.scaling import evaluators, runs
from compgen_jax.scaling import step as step_lib
from compgen_jax.scaling.state import init_run
from compgen_jax.tasks import combinatorics, splits
from compgen_jax.training import chunk as chunk_lib
from compgen_jax.training import loop
from compgen_jax.training.cache import cache_by_config


def task_bits(cfg: ml_collections.ConfigDict) -> jax.Array:
  """uint32 bitmask of every task in the table [T] (shared by all runs, not vmapped)."""
  bits = combinatorics.task_bits(cfg.task.num_modules, cfg.task.max_hotness)
  return jnp.asarray(bits.astype(np.uint32))  # M <= combinatorics.MAX_DEVICE_MODULES = 32


@cache_by_config
def init_one(cfg: ml_collections.ConfigDict):
  """(key, hparams, split) -> one run's state; one object per config, so the engine's programs
  built from it compile once per process."""
  return lambda key, hparams, split: init_run(key, hparams, cfg, split)


@cache_by_config
def step_one(cfg: ml_collections.ConfigDict):
  """(state, bits_T) -> (state, metrics): one run's training step."""
  return functools.partial(step_lib.train_step, cfg=cfg)


@cache_by_config
def evaluators_one(cfg: ml_collections.ConfigDict, names=None) -> dict:
  """name -> (state, bits_T) -> {metric: scalar}, for the named evaluators (default cfg.evals)."""
  return evaluators.one_run(cfg, names)


def init_inputs(cfg: ml_collections.ConfigDict, grid: list[dict]) -> tuple:
  """(keys [R], hparams {name: [R]}, splits [R, T]): init_one's inputs, the splits computed on
  the host first so the compiled program has no host callback and the persistent compilation
  cache can keep it (start-up)."""
  keys, hparams = runs.run_inputs(cfg, grid)
  return keys, hparams, runs.host_splits(cfg, keys, hparams)


def make_init(cfg: ml_collections.ConfigDict):
  """(keys [R], hparams {name: [R]}) -> stacked RunState on one device, jitted, the splits
  computed on the host (training creates its runs sharded: loop.init_runs)."""
  return lambda keys, hparams: loop.jitted_init(init_one(cfg))(
      keys, hparams, runs.host_splits(cfg, keys, hparams))


def abstract_inputs(cfg: ml_collections.ConfigDict, grid: list[dict]) -> tuple:
  """init_one's inputs for the runs of `grid` with the splits as shapes (none computed): what
  checkpoints restore against (loop.restore)."""
  keys, hparams = runs.run_inputs(cfg, grid)
  T, R = combinatorics.num_tasks(cfg.task.num_modules, cfg.task.max_hotness), len(grid)
  vec, scalar = jax.ShapeDtypeStruct((R, T), jnp.int32), jax.ShapeDtypeStruct((R,), jnp.int32)
  return keys, hparams, splits.Split(vec, scalar, vec, scalar)


def abstract_state(cfg: ml_collections.ConfigDict, grid: list[dict]):
  """Shapes and dtypes of the stacked state (no split computed)."""
  return loop.abstract_state(init_one(cfg), abstract_inputs(cfg, grid))


def family(cfg: ml_collections.ConfigDict, grid: list[dict],
           strategy: str = "auto") -> loop.Family:
  """The runs of `grid` (runs.run_grid, splits precomputed) for the engine: the training step
  over the task table, the evaluators of cfg.evals when due."""
  return loop.Family(
      grid=grid, init_one=init_one(cfg), inputs=init_inputs(cfg, grid), step=step_one(cfg),
      consts=lambda: (task_bits(cfg),), evaluators=evaluators_one(cfg),
      due=lambda step: evaluators.due(cfg, step),  # each at its own every; all at the last step
      strategy=strategy)


def train_and_evaluate(cfg: ml_collections.ConfigDict, workdir: str,
                       stop_after: int | None = None) -> list[dict]:
  """Trains all runs of `cfg` in `workdir` through the engine (resuming if it holds
  checkpoints). Returns the final evaluation row of each run."""
  loop.check_stop_after(cfg.train, stop_after)
  runs.validate(cfg)
  grid = runs.precompute_splits(cfg, runs.run_grid(cfg))
  return loop.run(family(cfg, grid), cfg, workdir, stop_after)


def make_chunk(cfg: ml_collections.ConfigDict, length: int, strategy: str = "auto"):
  """The engine's jitted chunk of `length` steps for cfg's runs: (states, bits_T) -> (states,
  metrics {name: [R, length]}, finite [R]); the states are donated."""
  return chunk_lib.make_chunk(step_one(cfg), length, strategy)


def make_evaluate(cfg: ml_collections.ConfigDict, names=None):
  """(states, bits_T, only=None) -> {metric: [R]} of the named evaluators (default cfg.evals)."""
  return loop.make_evaluate(evaluators_one(cfg, None if names is None else tuple(names)), 1)
