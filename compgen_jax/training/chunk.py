"""The jitted training chunk of every family: a family's one-run `step` scanned over a chunk of
steps, with a finite flag, lifted to stacked runs (vmapped, or one run after another on a CPU)."""

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from compgen_jax.types import PyTree

STRATEGIES = ("auto", "vmap", "map")
# "auto" maps runs one after another on a CPU when a run's largest weight matrix has at least this
# many entries (an MLP of width 128): below it each op is small, per-op overhead dominates and
# the vmapped program is faster (throughput.py, width 64: 8 vmapped runs 1.24x of one run, mapped
# 1.02x).
MAP_MIN_WEIGHTS = 128 * 128
# Jitted programs kept per process, by the family's function objects: enough for every config a
# process trains; bounded because a family that builds its step per call (letters' phases) would
# otherwise keep every compiled program for the process's life.
PROGRAMS_KEPT = 32


def all_finite(tree: PyTree) -> jax.Array:
  """True when every floating leaf of `tree` is finite."""
  leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)
            if jnp.issubdtype(x.dtype, jnp.floating)]
  return jnp.all(jnp.stack(leaves))


def runs_one_after_another(params: PyTree) -> bool:
  """The rule behind strategy "auto" for runs with stacked parameters `params` [R, ...]: one
  after another on a single CPU device when a run's largest weight has >= MAP_MIN_WEIGHTS
  entries, else vmapped. XLA:CPU runs vmapped runs' matmuls as batched dots, slower per FLOP than
  one run's plain dots (throughput.py: 8 vmapped runs 0.93x of one run at width 512, mapped
  1.01x), while an accelerator fills its cores with the batch. Sharded over several devices the
  runs stay vmapped (each device steps its own shard)."""
  largest = max(math.prod(a.shape[1:]) for a in jax.tree.leaves(params))
  return (jax.default_backend() == "cpu" and jax.device_count() == 1
          and largest >= MAP_MIN_WEIGHTS)


def over_runs(chunk_one_run: Callable, strategy: str) -> Callable:
  """(states, *consts) -> out of one run's `chunk_one_run(state, *consts)`, lifted to stacked
  runs [R]: "vmap", or "map" (lax.map over the run axis with the whole chunk inside, so each run
  is the one-run program and nothing is sliced or re-stacked per step or layer). The constants
  are shared by every run."""
  if strategy == "map":
    return lambda states, *consts: jax.lax.map(lambda s: chunk_one_run(s, *consts), states)
  return lambda states, *consts: jax.vmap(
      chunk_one_run, in_axes=(0, *(None,) * len(consts)))(states, *consts)


def check_strategy(strategy: str) -> None:
  if strategy not in STRATEGIES:
    raise ValueError(f"unknown strategy {strategy!r}; allowed: {', '.join(STRATEGIES)}")


def resolve(strategy: str, params: PyTree) -> str:
  """The strategy to lift with ("vmap" or "map"); "auto" is runs_one_after_another(params)."""
  check_strategy(strategy)
  if strategy == "auto":
    return "map" if runs_one_after_another(params) else "vmap"
  return strategy


def params_of(state):
  return state.params


def scan_one_run(state, *consts, step: Callable, length: int, params: Callable = params_of):
  """One run's chunk: `step` scanned `length` times -> (state, metrics {name: [length]}, finite)."""
  state, metrics = jax.lax.scan(lambda s, _: step(s, *consts), state, length=length)
  finite = all_finite(params(state)) & jnp.all(jnp.isfinite(metrics["train/loss"]))
  return state, metrics, finite


@functools.lru_cache(maxsize=PROGRAMS_KEPT)
def make_chunk(step: Callable, length: int, strategy: str = "auto",
               params: Callable = params_of) -> Callable:
  """jit(runs of scan over `length` steps): (states, *consts) -> (states, metrics, finite).

  `step(state, *consts) -> (state, {name: scalar})` is one run's step; its metrics must hold
  "train/loss". The runs are vmapped or stepped one after another (over_runs; "auto" picks by
  backend and the size of `params(state)`: runs_one_after_another). metrics are stacked
  [runs, length]; finite [runs] says the loss and parameters stayed finite. The state buffers are
  donated: the chunk updates them in place. Memoised by its arguments (PROGRAMS_KEPT), so a
  family that passes the same `step` object compiles once per process.
  """
  check_strategy(strategy)  # here, not when first traced
  one_run = functools.partial(scan_one_run, step=step, length=length, params=params)
  return jax.jit(lambda states, *consts: over_runs(one_run, resolve(strategy, params(states)))(
      states, *consts), donate_argnums=0)
