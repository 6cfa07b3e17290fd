"""Scenes of K object slots (a rows x cols grid of cells), each object one of S shapes in one of C
colours at a jittered position inside its cell; rendered on the device as a gather from a table of
every (shape, colour, offset) cell image.

Pixels are RGB in [0, 1] on a black background; every palette colour has a channel at 1, so a
pixel is foreground when its largest channel exceeds 1/2 (detector.py).
"""

from typing import NamedTuple

import jax.numpy as jnp
import ml_collections
import numpy as np

from compgen_jax import checks
from compgen_jax.types import ConfigError

# Every palette colour has max channel 1 and is >= 0.5 away (L2) from every other.
PALETTE = np.array([
    (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (1.0, 1.0, 0.0),
    (1.0, 0.0, 1.0), (0.0, 1.0, 1.0), (1.0, 1.0, 1.0), (1.0, 0.5, 0.0),
], np.float32)
COLOUR_NAMES = ("red", "green", "blue", "yellow", "magenta", "cyan", "white", "orange")

# 5 x 5 binary shapes; two different ones overlap with IoU < 0.65 at every relative offset
# (tested), so a clean render scores IoU 1 with its own shape and <= 0.65 with any other.
_SHAPE_ROWS = {
    "square": ("#####", "#####", "#####", "#####", "#####"),
    "plus": ("..#..", "..#..", "#####", "..#..", "..#.."),
    "cross": ("#...#", ".#.#.", "..#..", ".#.#.", "#...#"),
    "ring": ("#####", "#...#", "#...#", "#...#", "#####"),
    "triangle": ("..#..", "..#..", ".###.", ".###.", "#####"),
    "dots": ("#.#.#", ".....", "#.#.#", ".....", "#.#.#"),
    "ell": ("#....", "#....", "#....", "#....", "#####"),
    "eich": ("#...#", "#...#", "#####", "#...#", "#...#"),
}
SHAPE_NAMES = tuple(_SHAPE_ROWS)
TEMPLATES = np.stack([np.array([[c == "#" for c in row] for row in rows], np.float32)
                      for rows in _SHAPE_ROWS.values()])  # [8, 5, 5]
PATCH = TEMPLATES.shape[-1]


class Geometry(NamedTuple):
  """Static layout: image H x W, a rows x cols grid of cells of ch x cw pixels (one slot each),
  J x J jitter offsets of the 5 x 5 patch inside a cell, starting at (top, left)."""
  height: int
  width: int
  rows: int
  cols: int
  cell_h: int
  cell_w: int
  jitter: int
  top: int
  left: int
  num_shapes: int
  num_colours: int

  @property
  def num_slots(self) -> int:
    return self.rows * self.cols

  @property
  def num_offsets(self) -> int:
    return self.jitter * self.jitter

  @property
  def num_combos(self) -> int:
    return (self.num_shapes * self.num_colours) ** self.num_slots


def default_config() -> ml_collections.ConfigDict:
  """The `scene` config subtree."""
  return ml_collections.ConfigDict(dict(
      image_size=16, grid=(1, 2), num_shapes=4, num_colours=4, jitter=3))


def geometry(scene: ml_collections.ConfigDict) -> Geometry:
  """The layout of cfg.scene; ConfigError naming the field when it cannot be drawn."""
  size, (rows, cols) = int(scene.image_size), tuple(int(g) for g in scene.grid)
  checks.integer("scene.num_shapes", scene.num_shapes, 1, len(SHAPE_NAMES))
  checks.integer("scene.num_colours", scene.num_colours, 1, len(PALETTE))
  if rows < 1 or cols < 1 or size % rows or size % cols:
    raise ConfigError("scene.grid", f"(rows, cols) must be >= 1 and divide image_size {size}, "
                      f"got {tuple(scene.grid)}")
  ch, cw = size // rows, size // cols
  if scene.jitter < 1 or PATCH + scene.jitter - 1 > min(ch, cw):
    raise ConfigError("scene.jitter", f"must be >= 1 with {PATCH} + jitter - 1 <= the cell size "
                      f"{min(ch, cw)}, got {scene.jitter}")
  span = PATCH + scene.jitter - 1
  return Geometry(size, size, rows, cols, ch, cw, int(scene.jitter), (ch - span) // 2,
                  (cw - span) // 2, int(scene.num_shapes), int(scene.num_colours))


def placed_templates(geo: Geometry) -> np.ndarray:
  """Binary cell masks [S, J*J, ch, cw] of every shape at every offset."""
  out = np.zeros((geo.num_shapes, geo.num_offsets, geo.cell_h, geo.cell_w), np.float32)
  for j in range(geo.num_offsets):
    y, x = geo.top + j // geo.jitter, geo.left + j % geo.jitter
    out[:, j, y:y + PATCH, x:x + PATCH] = TEMPLATES[:geo.num_shapes]
  return out


def cell_table(geo: Geometry) -> np.ndarray:
  """The patch table [S, C, J*J, ch, cw, 3]: every cell image the renderer can draw."""
  masks = placed_templates(geo)[:, None, :, :, :, None]
  return masks * PALETTE[None, :geo.num_colours, None, None, None, :]


def render(table, shapes_BxK, colours_BxK, offsets_BxK, geo: Geometry):
  """Images [B, H, W, 3]: each slot's cell gathered from the table, cells tiled row-major."""
  cells = jnp.asarray(table)[shapes_BxK, colours_BxK, offsets_BxK]  # [B, K, ch, cw, 3]
  B = cells.shape[0]
  grid = cells.reshape(B, geo.rows, geo.cols, geo.cell_h, geo.cell_w, 3)
  return grid.transpose(0, 1, 3, 2, 4, 5).reshape(B, geo.height, geo.width, 3)


def cells_of(images_BxHxWx3, geo: Geometry):
  """The inverse tiling: per-slot cells [B, K, ch, cw, 3]."""
  B = images_BxHxWx3.shape[0]
  grid = images_BxHxWx3.reshape(B, geo.rows, geo.cell_h, geo.cols, geo.cell_w, 3)
  return grid.transpose(0, 1, 3, 2, 4, 5).reshape(B, geo.num_slots, geo.cell_h, geo.cell_w, 3)


def decode_combos(idx_B, geo: Geometry):
  """Combination index -> (shapes [B, K], colours [B, K]): slot k's (shape, colour) is digit k
  (base S*C, least significant first) of the index, as shape * C + colour."""
  base = geo.num_shapes * geo.num_colours
  digits = jnp.stack([(idx_B // base ** k) % base for k in range(geo.num_slots)], axis=-1)
  return digits // geo.num_colours, digits % geo.num_colours


def encode_combos(shapes_BxK, colours_BxK, geo: Geometry):
  """(shapes, colours) [B, K] -> combination indices [B] (inverse of decode_combos)."""
  base = geo.num_shapes * geo.num_colours
  digits = shapes_BxK * geo.num_colours + colours_BxK
  weights = np.array([base ** k for k in range(geo.num_slots)], np.int64)
  return (digits * weights).sum(-1)
