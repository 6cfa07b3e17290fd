"""Sup-norm error of a constructed network against its teacher on a sample of the domain.

The domain is the task table (all subsets of 1..K of M modules; a random sample when it is big)
with weights drawn as in training plus the all-ones vertex, and inputs x on a grid of [-1, 1]^I
plus uniform draws. The measured sup is a lower estimate of the true sup, so it must sit below any
valid bound.
"""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np

from compgen_jax.students import mlp
from compgen_jax.tasks import combinatorics, hyperteacher, latents
from compgen_jax.theory import construction


def task_sample(key: jax.Array, M: int, K: int, max_tasks: int, rows: int = 0,
                modules: int = 0) -> np.ndarray:
  """float32 [B, M']: k-hot rows of the table, or of a random subset of max_tasks when it is larger.

  rows / modules > 0 pad to that many rows (repeats of the first: a max ignores them) and columns
  (zero modules), so tables of several M share one compiled evaluation.
  """
  table_TxM = combinatorics.task_table(M, K).astype(np.float32)
  if table_TxM.shape[0] > max_tasks:
    gen = np.random.default_rng(np.asarray(jax.random.key_data(key)))
    table_TxM = table_TxM[np.sort(gen.choice(table_TxM.shape[0], max_tasks, replace=False))]
  pad_rows = max(rows - table_TxM.shape[0], 0)
  table_TxM = np.concatenate([table_TxM, np.repeat(table_TxM[:1], pad_rows, axis=0)])
  return np.pad(table_TxM, ((0, 0), (0, max(modules - M, 0))))


@functools.partial(jax.jit, static_argnames=("kind", "weight_draws"))
def weighted_latents(key: jax.Array, khot_BxM: jax.Array, kind: str,
                     weight_draws: int) -> jax.Array:
  """[B * weight_draws, M]: each task at weight 1 (a vertex of the domain), then weight draws."""
  draws = [latents.sample_latent(jax.random.fold_in(key, d), khot_BxM, kind)
           for d in range(weight_draws - 1)]
  return jnp.concatenate([khot_BxM] + draws)


def input_points(key: jax.Array, I: int, grid_points: int, num_random: int) -> jax.Array:
  """float32 [P, I]: the grid linspace(-1, 1, g)^I (corners included) and uniform draws."""
  axis = np.linspace(-1.0, 1.0, grid_points) if grid_points else np.zeros((0,))
  grid = np.asarray(list(itertools.product(axis, repeat=I)), np.float32).reshape(-1, I)
  rand = jax.random.uniform(key, (num_random, I), jnp.float32, -1.0, 1.0)
  return jnp.concatenate([jnp.asarray(grid), rand])


@functools.partial(jax.jit, static_argnames=("max_hotness", "resolution"))
def _sup_error(teacher, z_CxBxM, x_PxI, max_hotness: int, resolution: int):
  I, H = teacher["theta"][0].shape[1:]
  cfg = construction.student_config(I, H, resolution)
  net = construction.construct(teacher, max_hotness, resolution)

  def chunk(z_BxM):
    x_BxPxI = jnp.broadcast_to(x_PxI, z_BxM.shape[:1] + x_PxI.shape)
    y = hyperteacher.apply(teacher, z_BxM, x_BxPxI, max_hotness)
    pred, _ = mlp.apply(net, z_BxM, x_BxPxI, y.shape[-1], cfg)
    return jnp.abs(pred - y).max()

  return jax.lax.map(chunk, z_CxBxM).max()


def sup_error(teacher: dict, max_hotness: int, resolution: int, z_BxM: jax.Array,
              x_PxI: jax.Array, max_elements: int, float64: bool) -> float:
  """max |net(z, x) - teacher(z, x)| over all latents x inputs, net = construct(teacher, K, N).

  float64 (teacher, construction and evaluation) removes the float32 rounding floor (~1e-6) that
  would flatten the N^-2 curve at large N. Latents go through in chunks of at most max_elements
  hidden activations each.
  """
  I, H = teacher["theta"][0].shape[1:]
  widths = construction.hidden_widths(I, H, resolution)
  B, P = z_BxM.shape[0], x_PxI.shape[0]
  per_chunk = int(np.clip(max_elements // (P * widths[0]), 1, B))
  num_chunks = -(-B // per_chunk)
  # Pad with repeats of the first latent: they do not change the max.
  z_pad = jnp.concatenate([z_BxM, jnp.repeat(z_BxM[:1], num_chunks * per_chunk - B, axis=0)])
  with jax.enable_x64(float64):
    dtype = jnp.float64 if float64 else jnp.float32
    cast = lambda tree: jax.tree.map(lambda a: jnp.asarray(a, dtype), tree)
    err = _sup_error(cast(teacher), cast(z_pad).reshape(num_chunks, per_chunk, -1), cast(x_PxI),
                     max_hotness, resolution)
    return float(err)
