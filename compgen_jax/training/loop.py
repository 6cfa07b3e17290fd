"""The training engine's loop, for every family: a family hands it `init_one` (one run's state
from its inputs) and `step` (one run's step), and the engine does the rest: vmap or map over the
runs, scan over a chunk of steps, jit with donation, padding and sharding over the devices,
eval_shape for restore, resume equal to an uninterrupted run, the NaN stop, metric rows,
checkpoints, evaluations when due, a family's early stop and the progress bar. It acts only
between jitted chunks."""

import dataclasses
import functools
import math
import os
from collections.abc import Callable

import jax
import ml_collections
import numpy as np
from absl import logging
from jax.sharding import Mesh

from compgen_jax import checkpointing, files, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.training import chunk as chunk_lib
from compgen_jax.training import sharding
from compgen_jax.types import ConfigError, NonFiniteError, PyTree


@dataclasses.dataclass(frozen=True)
class Family:
  """One program's runs as a family hands them to the engine (`run`): functions of ONE run.

  The engine stacks the runs on a leading axis [R] and pads and shards it (sharding.py); a family
  never writes vmap, scan, jit or sharding. Pass the same function objects for the same config
  (build them with cache.cache_by_config) and a process compiles each program once.
  """
  grid: list[dict]          # one dict per real run: the fields of its rows (run, seed, ...)
  init_one: Callable        # (*inputs of one run) -> the run's state (a pytree)
  inputs: tuple             # init_one's arguments for every run, each leaf leading with [R]
  step: Callable            # (state, *consts) -> (state, {name: scalar}), "train/loss" among them
  consts: Callable = lambda: ()  # () -> values every step and evaluation gets, shared by the runs
  evaluators: dict = dataclasses.field(default_factory=dict)  # name -> (state, *consts) -> {k: x}
  due: Callable = lambda step: ()  # step -> the evaluators' names due after that step
  params: Callable = chunk_lib.params_of  # the trained parameters (params.json, NaN check)
  strategy: str = "auto"    # runs vmapped or one after another: chunk.STRATEGIES
  # {metric: [R] values of the real runs} of an evaluation -> whether training ends there (early
  # stop: every run stops together, at that step's checkpoint; train.num_steps is then a cap);
  # None: no early stop (nothing read back on resume)
  stops: Callable | None = None


def stacked(tree: PyTree) -> PyTree:
  """Shapes and dtypes of `tree`'s leaves (what eval_shape reads), without their values."""
  return jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a), a.dtype), tree)


@functools.lru_cache(maxsize=chunk_lib.PROGRAMS_KEPT)
def jitted_init(init_one: Callable, out_shardings=None) -> Callable:
  """jit(vmap(init_one)): per-run inputs [R] -> stacked states [R]."""
  init = jax.vmap(init_one)
  return jax.jit(init) if out_shardings is None else jax.jit(init, out_shardings=out_shardings)


def abstract_state(init_one: Callable, inputs: tuple) -> PyTree:
  """Shapes and dtypes of the stacked state of runs with `inputs` (values or ShapeDtypeStructs),
  to restore checkpoints against."""
  return jax.eval_shape(jitted_init(init_one), *stacked(inputs))


def restore(workdir: str, init_one: Callable, inputs: tuple,
            step: int | None = None) -> tuple[int, PyTree]:
  """(step, run-stacked state) of `workdir`'s checkpoint at `step` (default the latest), restored
  against eval_shape(vmap(init_one)) of `inputs` (values or ShapeDtypeStructs), replicated: the
  one restore of runs' states, for the loop's resume and every application's passes.
  CheckpointError naming the path when it is missing, corrupt or of another shape."""
  return checkpointing.restore(os.path.join(workdir, workdir_lib.CHECKPOINT_DIR),
                               abstract_state(init_one, inputs), step)


def init_runs(family: Family, mesh: Mesh) -> PyTree:
  """Fresh stacked runs, padded to a multiple of the mesh's devices and created sharded over it."""
  return sharding.init_runs(lambda out: jitted_init(family.init_one, out), family.inputs,
                            len(family.grid), mesh)


@functools.lru_cache(maxsize=chunk_lib.PROGRAMS_KEPT)
def _jitted_evaluator(evaluate_one: Callable, num_consts: int) -> Callable:
  return jax.jit(jax.vmap(evaluate_one, in_axes=(0, *(None,) * num_consts)))


def make_evaluate(evaluators: dict, num_consts: int) -> Callable:
  """(states, *consts, only=None) -> {metric: [R]}: each named one-run evaluator its own
  jit(vmap over runs), so its numbers never depend on which others run with it (in training or
  in a standalone pass over checkpoints); `only` picks a subset of the names."""
  jitted = {name: _jitted_evaluator(fn, num_consts) for name, fn in evaluators.items()}

  def evaluate(states, *consts, only=None):
    out = {}
    for name in (tuple(jitted) if only is None else only):
      out.update(jitted[name](states, *consts))
    return out

  return evaluate


def restore_or_init(family: Family, workdir: str, mesh: Mesh):
  """The latest checkpoint of `workdir` if there is one, else fresh runs. Returns (step, state),
  padded and sharded over the mesh.

  Checkpoints hold the real runs only (`run` saves sharding.real_runs), so one written with any
  device count restores here and is re-padded for this mesh.
  """
  ckpt_dir = os.path.join(workdir, workdir_lib.CHECKPOINT_DIR)
  metrics_path = os.path.join(workdir, workdir_lib.METRICS_FILE)
  if checkpointing.available_steps(ckpt_dir):
    step, state = restore(workdir, family.init_one, family.inputs)
    if sharding.is_main_process():
      metric_writer.truncate_after(metrics_path, step)
    logging.info("resuming %s from step %d", workdir, step)
    return step, sharding.shard_runs(state, mesh)
  # No checkpoint: rows a killed or failed earlier attempt wrote are dropped, so a restart leaves
  # exactly the rows of an uninterrupted run.
  if sharding.is_main_process():
    metric_writer.truncate_after(metrics_path, 0)
  return 0, init_runs(family, mesh)


def stopped(family: Family, metrics_path: str, step: int) -> bool:
  """Whether the runs stopped early at `step`: its rows (one per run, with their evaluation)
  satisfy family.stops. How a resumed run knows it had ended there; False at step 0 and for rows
  without an evaluation; False without reading the rows for a family with no stop rule."""
  if family.stops is None or step == 0:
    return False
  rows = [r for r in metric_writer.read_rows(metrics_path) if r.get("step") == step]
  keys = set.intersection(*(set(r) for r in rows)) - {"step", *family.grid[0]} if rows else set()
  evaluation = {k: np.array([r[k] for r in rows]) for k in keys if not k.startswith("train/")}
  return bool(evaluation) and bool(family.stops(evaluation))


def count_params(params_R) -> int:
  """Parameters of one run of a run-stacked parameter pytree (the leading axis is runs)."""
  return sum(math.prod(leaf.shape[1:]) for leaf in jax.tree.leaves(params_R))


def _describe(grid: list[dict], bad: np.ndarray) -> str:
  return "; ".join(", ".join(f"{k}={v}" for k, v in run.items())
                   for run, b in zip(grid, bad, strict=True) if b)


def check_stop_after(train: ml_collections.ConfigDict, stop_after: int | None) -> int:
  """The step this invocation ends at: `stop_after` (a multiple of train.checkpoint_every, or a
  ConfigError) capped at train.num_steps; train.num_steps when None."""
  if stop_after is not None and stop_after % train.checkpoint_every:
    raise ConfigError("stop_after", f"must be a multiple of train.checkpoint_every "
                      f"({train.checkpoint_every}), got {stop_after}")
  return train.num_steps if stop_after is None else min(stop_after, train.num_steps)


def run(family: Family, cfg: ml_collections.ConfigDict, workdir: str,
        stop_after: int | None = None,
        train: ml_collections.ConfigDict | None = None) -> list[dict]:
  """The one training loop: trains `family`'s runs in `workdir` by the `train` section (default
  cfg.train; an application with several training phases passes each phase's own): num_steps,
  chunk_size, log_every, checkpoint_every, max_checkpoints, writers, progress. The caller has
  validated cfg, the train section included (training.config.validate_train, in each
  application's validate: once, before anything is written). It resumes from the latest
  checkpoint to the rows of an uninterrupted run; the runs are sharded over every device; a
  non-finite loss or parameter stops it with the last good checkpoint kept. config.json records
  cfg, the application's config as its config file gives it. `stop_after` (a checkpoint step)
  ends this invocation there, as a preempted job would. An evaluation that family.stops accepts
  ends training at that step (checkpointed), and a resumed run that had stopped trains no
  further.
  Returns each run's row of the last step."""
  train = cfg.train if train is None else train
  end = check_stop_after(train, stop_after)
  chunk = chunk_lib.make_chunk(family.step, train.chunk_size, family.strategy, family.params)
  evaluate = make_evaluate(family.evaluators, len(family.consts()))
  grid = family.grid
  main_process = sharding.is_main_process()  # the one writer of the workdir's files
  if main_process:
    workdir_lib.prepare(workdir, cfg)
  else:
    workdir_lib.check(workdir, cfg)
  metrics_path = os.path.join(workdir, workdir_lib.METRICS_FILE)
  mesh = sharding.make_mesh()  # runs padded to a multiple of the devices, sharded over them
  # Before restore: every process passes orbax's create-directory barrier first, so none can
  # find checkpoints/ made by another while deciding whether to restore (a barrier mismatch).
  mngr = checkpointing.manager(os.path.join(workdir, workdir_lib.CHECKPOINT_DIR),
                               max_to_keep=train.max_checkpoints)
  step, state = restore_or_init(family, workdir, mesh)
  if main_process:  # what a report compares students by, without building one
    files.write_json(os.path.join(workdir, workdir_lib.PARAMS_FILE),
                     {"student": count_params(family.params(state))})
  # after restore: it purges past step. Process 0 alone opens the sinks: another process that
  # touched metrics.jsonl (an empty append still cuts what looks like a torn last line) could cut
  # rows process 0 is writing, and a second TensorBoard writer would purge its events.
  writer = (metric_writer.make_writer(train.writers, workdir, step, grid) if main_process
            else metric_writer.Writers([]))
  consts = sharding.replicate(family.consts(), mesh)
  bar = metric_writer.progress_bar(train.num_steps, step, desc=os.path.basename(workdir),
                                   disable=not train.progress)
  last_eval, shown = None, {}
  if stopped(family, metrics_path, step):
    end = step
  while step < end:
    state, metrics, finite = chunk(state, *consts)
    metrics, finite = sharding.to_host((metrics, finite))
    every = train.log_every  # one row per window of steps keeps long sweeps' files small
    windows = metric_writer.window_means(
        jax.tree.map(lambda a: a[:len(grid)].T, metrics), every)  # padding runs: no rows
    rows = metric_writer.stacked_rows(windows, step + every, grid if main_process else [], every)
    step += train.chunk_size
    finite = finite[:len(grid)]
    due = family.due(step)
    if finite.all() and due:
      last_eval = sharding.to_host(evaluate(state, *consts, only=due))
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
    stop = bool(due) and family.stops is not None and bool(
        family.stops({k: v[:len(grid)] for k, v in last_eval.items()}))
    if step % train.checkpoint_every == 0 or step == train.num_steps or stop:
      checkpointing.save(mngr, step, sharding.real_runs(state, len(grid), mesh))
    bar.update(train.chunk_size)
    bar.set_postfix({k: f"{v:.4g}" for k, v in shown.items()})
    if stop:
      logging.info("%s: stopped early at step %d", workdir, step)
      end = step
  bar.close()
  mngr.close()
  writer.close()
  return final_rows(metrics_path, end)


def final_rows(metrics_path: str, step: int) -> list[dict]:
  """The row of each run at `step`, the last (it carries the final evaluation)."""
  return [r for r in metric_writer.read_rows(metrics_path) if r["step"] == step]
