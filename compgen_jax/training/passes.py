"""Standalone passes over saved checkpoints, for every family: over_checkpoints runs named one-run
functions over the selected checkpoints (select_steps: the latest, one, or every), restored,
padded and sharded by the engine; write_pass replaces each step's rows as soon as they are
computed, so a re-run over a step leaves one copy of its rows."""

import functools
import os
from collections.abc import Callable

import jax
import numpy as np

from compgen_jax import checkpointing, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.training import loop, sharding
from compgen_jax.types import CheckpointError, ConfigError, PyTree

PLACEMENTS = ("sharded", "one_device")


def select_steps(checkpoints: str, step: int | None, every: bool) -> list[int]:
  """Steps of the checkpoint directory `checkpoints` to process: all (every), the given one, or
  the latest (every family's passes)."""
  if every and step is not None:
    raise ConfigError("step", "give either a step or every, not both")
  available = checkpointing.available_steps(checkpoints)
  if not available:
    raise CheckpointError(f"no checkpoint found in {checkpoints!r}")
  if every:
    return available
  if step is None:
    return [available[-1]]
  if step not in available:
    raise CheckpointError(f"no checkpoint for step {step} in {checkpoints!r}; "
                          f"available: {available}")
  return [step]


def write_pass(path: str, steps: list[int], rows_of_step) -> list[dict]:
  """Each step's rows from `rows_of_step(step)`, replacing that step's rows in the jsonl file
  `path` as soon as they are computed (a later step failing keeps them; a re-run leaves one copy
  of each row). Returns every step's rows."""
  out = []
  for step in steps:
    rows = rows_of_step(step)
    if sharding.is_main_process():
      metric_writer.replace_step_rows(path, step, rows)
    out.extend(rows)
  return out


def scalar_rows(step: int, outputs: dict, grid: list[dict]) -> list[dict]:
  """A row per run: the step, its grid fields and every output (a scalar per run), sorted."""
  return [{"step": step, **info, **{k: float(v[r]) for k, v in sorted(outputs.items())}}
          for r, info in enumerate(grid)]


def over_checkpoints(workdir: str, init_one: Callable, inputs: tuple, grid: list[dict],
                     fns: dict, out_file: str, step: int | None = None, every: bool = False,
                     consts: tuple = (), rows: Callable | None = None,
                     placement: str = "sharded", then: Callable | None = None) -> list[dict]:
  """The engine's pass over `workdir`'s selected checkpoints (select_steps). Each is restored
  (loop.restore against eval_shape(vmap(init_one)) of `inputs`: values or shapes) and, checked to
  hold its step, placed: its runs padded and sharded over every device ("sharded"), or all on the
  first device ("one_device", for programs XLA:CPU runs badly across devices); each named one-run
  function `fns[name](state, *consts) -> {key: array}` runs under its own jit(vmap over runs)
  (loop.make_evaluate); `then` (optional) maps those outputs of every run together, jitted (what
  must not be vmapped over runs: images' ridge solves, one at a time under lax.map); the padding
  runs are dropped and the outputs [R, ...] brought to the host. `rows(step, outputs, state)`
  (default: scalar_rows) then replaces that step's rows of `out_file` in the workdir
  (write_pass). Returns every step's rows."""
  if placement not in PLACEMENTS:
    raise ValueError(f"placement {placement!r}; allowed: {PLACEMENTS}")
  steps = select_steps(os.path.join(workdir, workdir_lib.CHECKPOINT_DIR), step, every)
  rows = rows or (lambda s, outputs, state: scalar_rows(s, outputs, grid))
  run = loop.make_evaluate(fns, len(consts))
  if then is not None:
    run = _then(run, _jitted(then))
  if placement == "sharded":
    mesh = sharding.make_mesh()
    place, consts = (lambda tree: sharding.shard_runs(tree, mesh)), sharding.replicate(consts, mesh)
  else:
    one = jax.local_devices()[0]
    place, consts = (lambda tree: jax.device_put(tree, one)), jax.device_put(consts, one)

  def rows_of_step(s: int) -> list[dict]:
    state = restored(workdir, init_one, inputs, s)
    outputs = jax.tree.map(lambda a: np.asarray(a)[:len(grid)],
                           sharding.to_host(run(place(state), *consts)))
    return rows(s, outputs, state)

  return write_pass(os.path.join(workdir, out_file), steps, rows_of_step)


@functools.lru_cache(maxsize=8)
def _jitted(fn: Callable) -> Callable:
  return jax.jit(fn)


def _then(run: Callable, then: Callable) -> Callable:
  return lambda states, *consts: then(run(states, *consts))


def restored(workdir: str, init_one: Callable, inputs: tuple, step: int) -> PyTree:
  """The run-stacked state saved at `step` (loop.restore); a state with a `step` field must hold
  it in every run (CheckpointError otherwise)."""
  _, state = loop.restore(workdir, init_one, inputs, step)
  saved = np.asarray(getattr(state, "step", step))
  if not np.all(saved == step):
    raise CheckpointError(f"checkpoint {os.path.join(workdir, workdir_lib.CHECKPOINT_DIR)!r} "
                          f"step {step} holds states of step(s) {sorted(set(saved.tolist()))}")
  return state
