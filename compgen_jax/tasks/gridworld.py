"""The 7x7 four-room grid of the preference family: layout, moves and the observation.

Cells are numbered two ways: `flat` = row * 7 + col over the whole grid (49), and `cell` = index
into FREE_FLAT (19 free cells, row-major). Tables are numpy constants built once at import.
"""

import jax
import jax.numpy as jnp
import numpy as np

LAYOUT = """\
wwwwwww
w  w  w
w  w  w
ww   ww
w  w  w
w  w  w
wwwwwww"""

NOTHING, UP, RIGHT, DOWN, LEFT = range(5)
ACTION_NAMES = ("nothing", "up", "right", "down", "left")
NUM_ACTIONS = len(ACTION_NAMES)
DELTAS = np.array([[0, 0], [-1, 0], [0, 1], [1, 0], [0, -1]])  # (d_row, d_col) per action

WALLS_7x7 = np.array([[c == "w" for c in line] for line in LAYOUT.splitlines()])
SIZE = WALLS_7x7.shape[0]
NUM_FLAT = WALLS_7x7.size
FREE_FLAT = np.flatnonzero(~WALLS_7x7.reshape(-1))  # [C] flat index of each free cell
NUM_CELLS = FREE_FLAT.size


def cell_of(row: int, col: int) -> int:
  """The free-cell index of (row, col); ValueError on a wall."""
  hits = np.flatnonzero(FREE_FLAT == row * SIZE + col)
  if hits.size == 0:
    raise ValueError(f"({row}, {col}) is a wall")
  return int(hits[0])


def _next_cell_table() -> np.ndarray:
  """[C, A] free cell reached by each action; a wall (or 'nothing') leaves the agent in place."""
  rows, cols = np.divmod(FREE_FLAT, SIZE)
  out = np.zeros((NUM_CELLS, NUM_ACTIONS), np.int32)
  for c in range(NUM_CELLS):
    for a, (dr, dc) in enumerate(DELTAS):
      r, k = rows[c] + dr, cols[c] + dc
      out[c, a] = c if WALLS_7x7[r, k] else cell_of(r, k)  # the border is all wall
  return out


NEXT_CELL_CxA = _next_cell_table()


def observe(agent_cell: jax.Array, obj_cell_O: jax.Array, obj_feat_O: jax.Array,
            avail_O: jax.Array, num_features: int) -> jax.Array:
  """The 7x7x(F+2) grid, flattened [49 * (F+2)]: feature one-hots of available objects, then the
  agent channel, then the wall channel (one task, one time step; not normalised)."""
  free_F = jnp.asarray(FREE_FLAT)
  obj_flat_OxP = jax.nn.one_hot(free_F[obj_cell_O], NUM_FLAT) * avail_O[:, None]
  objects_PxF = obj_flat_OxP.T @ jax.nn.one_hot(obj_feat_O, num_features)
  agent_P = jax.nn.one_hot(free_F[agent_cell], NUM_FLAT)
  walls_P = jnp.asarray(WALLS_7x7.reshape(-1), jnp.float32)
  grid_PxC = jnp.concatenate([objects_PxF, agent_P[:, None], walls_P[:, None]], axis=-1)
  return grid_PxC.reshape(-1)


def rms_normalise(x_ND: jax.Array, eps: float = 1e-6) -> jax.Array:
  """Each row divided by its root mean square (as the reference does per observation)."""
  return x_ND * jax.lax.rsqrt(jnp.mean(x_ND ** 2, axis=-1, keepdims=True) + eps)


def obs_dim(num_features: int) -> int:
  return NUM_FLAT * (num_features + 2)
