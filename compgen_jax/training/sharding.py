"""The run axis sharded over every device (all hosts' in a jax.distributed job).

Every leaf of the stacked RunState, the chunk's metrics and the evaluators' outputs lead with the
run axis [R]; the mesh has one axis, "runs", and those leaves are NamedSharding(mesh, P("runs")).
R is padded to a multiple of the device count with copies of the last real run: they train like
it, cost one run's compute each, and their rows are never written. The shared task table bits_T is
replicated. jit propagates the input shardings through the chunk and the evaluators, so each device
steps its own runs with no collective (tests/test_sharding.py checks the compiled chunk).

With one device nothing is padded or moved: exactly the unsharded program.

Checkpoints hold the real runs only (real_runs; restored replicated by checkpointing.restore, then
shard_runs re-pads), so a workdir resumes on any device count and evaluate/probe read it as before.
When runs are padded, each save first gathers the real runs onto every device (one state's memory
per device, at checkpoint steps only); with R a multiple of the devices the shards are saved as
they are. Several processes (jax.distributed): the small metrics are gathered to every host
(to_host) and process 0 alone writes the workdir's files.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from compgen_jax.types import PyTree

RUNS = "runs"


def make_mesh() -> Mesh:
  """A one-axis mesh ("runs") over all devices of all processes."""
  return Mesh(np.asarray(jax.devices()), (RUNS,))


def run_sharding(mesh: Mesh) -> NamedSharding:
  """Leading (run) axis split over the mesh; every other axis whole."""
  return NamedSharding(mesh, P(RUNS))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def padded_count(num_runs: int, mesh: Mesh) -> int:
  """num_runs rounded up to a multiple of the mesh's device count."""
  return -(-num_runs // mesh.size) * mesh.size


def pad(tree: PyTree, num_padded: int) -> PyTree:
  """Appends copies of the last run along the leading axis up to `num_padded` (numpy stays numpy;
  typed key arrays stay typed)."""
  def pad_leaf(a):
    extra = num_padded - a.shape[0]
    if extra == 0:
      return a
    lib = np if isinstance(a, np.ndarray) else jnp
    return lib.concatenate([a, lib.repeat(a[-1:], extra, axis=0)])

  return jax.tree.map(pad_leaf, tree)


def init_runs(jitted_init, inputs: tuple, num_runs: int, mesh: Mesh) -> PyTree:
  """Fresh stacked runs created sharded over the mesh: `jitted_init(out_shardings)` is a jit of
  a vmapped init over `inputs` (each leading with the run axis [num_runs]), called with the
  inputs padded to a multiple of the devices (the engine's init of every family)."""
  return jitted_init(run_sharding(mesh))(*pad(inputs, padded_count(num_runs, mesh)))


def _is_placed(tree: PyTree, sharding: NamedSharding) -> bool:
  return all(isinstance(a, jax.Array) and a.sharding.is_equivalent_to(sharding, a.ndim)
             for a in jax.tree.leaves(tree))


def shard_runs(tree: PyTree, mesh: Mesh) -> PyTree:
  """`tree` (leading run axis, unpadded, on any devices) padded and sharded over the mesh.

  A jitted copy, not device_put, so that it also works for arrays replicated over several hosts
  (a restored checkpoint); a tree already in place (one device, no padding) is returned as is.
  """
  num_padded = padded_count(jax.tree.leaves(tree)[0].shape[0], mesh)
  if num_padded == jax.tree.leaves(tree)[0].shape[0] and _is_placed(tree, run_sharding(mesh)):
    # relabelled, not copied: jit keys its cache by the sharding itself, and a restored
    # checkpoint's (replicated on an equivalent mesh) would compile the chunk a second time
    return jax.device_put(tree, run_sharding(mesh)) if jax.process_count() == 1 else tree
  return jax.jit(lambda t: pad(t, num_padded), out_shardings=run_sharding(mesh))(tree)


def replicate(tree: PyTree, mesh: Mesh) -> PyTree:
  """`tree` (host or one-device values, the same on every process) replicated over the mesh."""
  if mesh.size == 1:
    return tree
  host = jax.tree.map(np.asarray, tree)
  return jax.jit(lambda t: t, in_shardings=replicated(mesh), out_shardings=replicated(mesh))(host)


def real_runs(tree: PyTree, num_runs: int, mesh: Mesh) -> PyTree:
  """The first `num_runs` (real) runs of a padded tree, replicated (what a checkpoint holds, so
  it restores onto any device count); the tree itself when nothing is padded."""
  if jax.tree.leaves(tree)[0].shape[0] == num_runs:
    return tree
  return jax.jit(lambda t: jax.tree.map(lambda a: a[:num_runs], t),
                 out_shardings=replicated(mesh))(tree)


def to_host(tree: PyTree) -> PyTree:
  """Numpy copies of a (small) run-stacked tree, whole on every process: with several hosts
  each holds only its runs' shards, so they are gathered first (metrics: a few floats per run)."""
  if jax.process_count() == 1:
    return jax.tree.map(np.asarray, tree)
  return multihost_utils.process_allgather(tree, tiled=True)


def is_main_process() -> bool:
  """Process 0 writes the workdir's files (config.json, metrics.jsonl, plots); every process
  takes part in computing and in saving checkpoints (orbax coordinates the hosts)."""
  return jax.process_index() == 0


def fetched(fn):
  """`fn` with its (small, run-stacked) outputs copied to the host by to_host."""
  def call(*args):
    return to_host(fn(*args))

  return call
