"""The one training loop (`run`, for every experiment family: a `Trainable`) and the
hyperteacher / preference family's (train_and_evaluate). It acts only between jitted chunks."""

import dataclasses
import math
import os
from collections.abc import Callable

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging
from jax.sharding import Mesh

from compgen_jax import checkpointing, files, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.evaluation import evaluators
from compgen_jax.tasks import combinatorics, splits
from compgen_jax.training import runs, sharding
from compgen_jax.training import step as step_lib
from compgen_jax.training.state import cache_by_config, init_run
from compgen_jax.types import ConfigError, NonFiniteError

_make_chunk = cache_by_config(step_lib.make_train_chunk)
_make_evaluate = cache_by_config(evaluators.make_evaluate)


def task_bits(cfg: ml_collections.ConfigDict) -> jax.Array:
  """uint32 bitmask of every task in the table [T] (shared by all runs, not vmapped)."""
  bits = combinatorics.task_bits(cfg.task.num_modules, cfg.task.max_hotness)
  return jnp.asarray(bits.astype(np.uint32))  # M <= combinatorics.MAX_DEVICE_MODULES = 32


@cache_by_config
def _jitted_init(cfg: ml_collections.ConfigDict, out_shardings=None):
  init = jax.vmap(lambda key, hparams, split: init_run(key, hparams, cfg, split))
  return jax.jit(init) if out_shardings is None else jax.jit(init, out_shardings=out_shardings)


def make_init(cfg: ml_collections.ConfigDict, mesh: Mesh | None = None):
  """(keys [R], hparams {name: [R]}) -> stacked RunState: jit(vmap(init_run)) with the splits
  computed on the host first, so the compiled program has no host callback and the persistent
  compilation cache can keep it (start-up). With a mesh the runs are padded to a multiple of its
  devices and created sharded over it (sharding.py)."""
  def init(keys, hparams):
    splits_R = runs.host_splits(cfg, keys, hparams)
    if mesh is None:
      return _jitted_init(cfg)(keys, hparams, splits_R)
    return sharding.init_runs(lambda out: _jitted_init(cfg, out), (keys, hparams, splits_R),
                              len(keys), mesh)

  return init


def abstract_state(cfg: ml_collections.ConfigDict, grid: list[dict]):
  """Shapes and dtypes of the stacked state, to restore checkpoints against."""
  keys, hparams = runs.run_inputs(cfg, grid)
  T, R = combinatorics.num_tasks(cfg.task.num_modules, cfg.task.max_hotness), len(grid)
  vec, scalar = jax.ShapeDtypeStruct((R, T), jnp.int32), jax.ShapeDtypeStruct((R,), jnp.int32)
  return jax.eval_shape(_jitted_init(cfg), keys, hparams,
                        splits.Split(vec, scalar, vec, scalar))


@dataclasses.dataclass(frozen=True)
class Trainable:
  """What an experiment family hands the one loop (`run`): its runs and its jitted programs.

  Every state, metric and evaluation leaf leads with the run axis [R]; `run` pads R to the mesh
  and shards it (sharding.py), so a family writes its programs for stacked runs only.
  """
  grid: list[dict]          # one dict per real run: the fields of its rows (run, seed, ...)
  init: Callable            # mesh -> fresh stacked runs, padded and sharded over the mesh
  abstract: Callable        # () -> shapes and dtypes of the real runs' stacked state (restore)
  chunk: Callable           # (state, *inputs) -> (state, metrics {name: [R, chunk]}, finite [R])
  inputs: Callable = lambda mesh: ()  # mesh -> constants every call gets (replicated)
  evaluate: Callable | None = None    # (state, *inputs, due) -> {name: [R]} (on the host)
  due: Callable = lambda step: ()     # step -> the evaluators due after that step
  params: Callable = lambda state: state.params  # the student's parameters (params.json)


def restore_or_init(trainable: Trainable, workdir: str, mesh: Mesh):
  """The latest checkpoint of `workdir` if there is one, else fresh runs. Returns (step, state),
  padded and sharded over the mesh.

  Checkpoints hold the real runs only (`run` saves sharding.real_runs), so one written with any
  device count restores here and is re-padded for this mesh.
  """
  ckpt_dir = os.path.join(workdir, workdir_lib.CHECKPOINT_DIR)
  metrics_path = os.path.join(workdir, workdir_lib.METRICS_FILE)
  if checkpointing.available_steps(ckpt_dir):
    step, state = checkpointing.restore(ckpt_dir, trainable.abstract())
    if sharding.is_main_process():
      metric_writer.truncate_after(metrics_path, step)
    logging.info("resuming %s from step %d", workdir, step)
    return step, sharding.shard_runs(state, mesh)
  # No checkpoint: rows a killed or failed earlier attempt wrote are dropped, so a restart leaves
  # exactly the rows of an uninterrupted run.
  if sharding.is_main_process():
    metric_writer.truncate_after(metrics_path, 0)
  return 0, trainable.init(mesh)


def count_params(params_R) -> int:
  """Parameters of one run of a run-stacked parameter pytree (the leading axis is runs)."""
  return sum(math.prod(leaf.shape[1:]) for leaf in jax.tree.leaves(params_R))


def _describe(grid: list[dict], bad: np.ndarray) -> str:
  return "; ".join(", ".join(f"{k}={v}" for k, v in run.items())
                   for run, b in zip(grid, bad, strict=True) if b)


def _end_step(cfg: ml_collections.ConfigDict, stop_after: int | None) -> int:
  if stop_after is not None and stop_after % cfg.train.checkpoint_every:
    raise ConfigError("stop_after", f"must be a multiple of train.checkpoint_every "
                      f"({cfg.train.checkpoint_every}), got {stop_after}")
  return cfg.train.num_steps if stop_after is None else min(stop_after, cfg.train.num_steps)


def run(trainable: Trainable, cfg: ml_collections.ConfigDict, workdir: str,
        stop_after: int | None = None) -> list[dict]:
  """The one training loop: trains `trainable`'s runs in `workdir` (cfg.train: num_steps,
  chunk_size, log_every, checkpoint_every, max_checkpoints, writers, progress), resuming from
  its latest checkpoint to the rows of an uninterrupted run; the runs sharded over every device;
  a non-finite loss or parameter stops it with the last good checkpoint kept. The caller has
  validated cfg. `stop_after` (a checkpoint step) ends this invocation there, as a preempted job
  would. Returns each run's row of the last step."""
  end = _end_step(cfg, stop_after)
  grid = trainable.grid
  main_process = sharding.is_main_process()  # the one writer of the workdir's files
  if main_process:
    workdir_lib.prepare(workdir, cfg)
  else:
    workdir_lib.check(workdir, cfg)
  metrics_path = os.path.join(workdir, workdir_lib.METRICS_FILE)
  mesh = sharding.make_mesh()  # runs padded to a multiple of the devices, sharded over them
  step, state = restore_or_init(trainable, workdir, mesh)
  if main_process:  # what a report compares students by, without building one
    files.write_json(os.path.join(workdir, workdir_lib.PARAMS_FILE),
                     {"student": count_params(trainable.params(state))})
  # after restore: it purges past step. Process 0 alone opens the sinks: another process that
  # touched metrics.jsonl (an empty append still cuts what looks like a torn last line) could cut
  # rows process 0 is writing, and a second TensorBoard writer would purge its events.
  writer = (metric_writer.make_writer(cfg, workdir, step) if main_process
            else metric_writer.Writers([]))
  inputs = trainable.inputs(mesh)
  mngr = checkpointing.manager(os.path.join(workdir, workdir_lib.CHECKPOINT_DIR),
                               max_to_keep=cfg.train.max_checkpoints)
  bar = metric_writer.progress_bar(cfg.train.num_steps, step, desc=os.path.basename(workdir),
                                   disable=not cfg.train.progress)
  last_eval, shown = None, {}
  while step < end:
    state, metrics, finite = trainable.chunk(state, *inputs)
    metrics, finite = sharding.to_host((metrics, finite))
    every = cfg.train.log_every  # one row per window of steps keeps long sweeps' files small
    windows = metric_writer.window_means(
        jax.tree.map(lambda a: a[:len(grid)].T, metrics), every)  # padding runs: no rows
    rows = metric_writer.stacked_rows(windows, step + every, grid if main_process else [], every)
    step += cfg.train.chunk_size
    finite = finite[:len(grid)]
    due = trainable.due(step)
    if finite.all() and due:
      last_eval = trainable.evaluate(state, *inputs, due)
      for r, row in enumerate(rows[-len(grid):]):
        row.update({k: float(v[r]) for k, v in last_eval.items()})
      shown = {k: np.nanmean(v[:len(grid)]) for k, v in last_eval.items()
               if k.endswith("r2") or k.endswith("acc")}
    elif last_eval is None:  # the training loss until a first evaluation
      shown = {"loss": np.mean(windows["train/loss"][-1][:len(grid)])}
    writer.write(rows)
    if not finite.all():
      bar.close()
      writer.close()
      raise NonFiniteError(
          f"non-finite loss or parameters by step {step} in run(s): {_describe(grid, ~finite)}. "
          f"The last good checkpoint in {workdir!r} is kept (steps "
          f"{checkpointing.available_steps(os.path.join(workdir, workdir_lib.CHECKPOINT_DIR))}).")
    if step % cfg.train.checkpoint_every == 0 or step == cfg.train.num_steps:
      checkpointing.save(mngr, step, sharding.real_runs(state, len(grid), mesh))
    bar.update(cfg.train.chunk_size)
    bar.set_postfix({k: f"{v:.4g}" for k, v in shown.items()})
  bar.close()
  mngr.close()
  writer.close()
  return final_rows(metrics_path, cfg.train.num_steps)


def trainable(cfg: ml_collections.ConfigDict, grid: list[dict]) -> Trainable:
  """The hyperteacher / preference runs of `grid` (runs.run_grid, splits precomputed): the
  training chunk over the task table, the evaluators of cfg.evals when due."""
  return Trainable(
      grid=grid,
      init=lambda mesh: make_init(cfg, mesh)(*runs.run_inputs(cfg, grid)),
      abstract=lambda: abstract_state(cfg, grid),
      chunk=_make_chunk(cfg, cfg.train.chunk_size),
      inputs=lambda mesh: (sharding.replicate(task_bits(cfg), mesh),),
      evaluate=sharding.fetched(_make_evaluate(cfg)),
      due=lambda step: evaluators.due(cfg, step))  # each at its own every; all at the last step


def train_and_evaluate(cfg: ml_collections.ConfigDict, workdir: str,
                       stop_after: int | None = None) -> list[dict]:
  """Trains all runs of `cfg` in `workdir` through `run` (resuming if it holds checkpoints).
  Returns the final evaluation row of each run."""
  _end_step(cfg, stop_after)
  runs.validate(cfg)
  grid = runs.precompute_splits(cfg, runs.run_grid(cfg))
  return run(trainable(cfg, grid), cfg, workdir, stop_after)


def final_rows(metrics_path: str, num_steps: int) -> list[dict]:
  """The row of each run at the last step (it carries the final evaluation)."""
  return [r for r in metric_writer.read_rows(metrics_path) if r["step"] == num_steps]
