"""The exact detector: per cell, the shape by best template IoU over the jitter offsets, the colour
by nearest palette entry; a cell that is blank or ambiguous is rejected (counts as wrong).

A pixel is foreground when its largest channel is above 1/2. A cell is accepted when its best IoU
is >= iou_min, the best shape beats every other by margin (so a union of two shapes is rejected),
its mean foreground colour is within colour_max_dist of a palette entry and at least colour_agree
of its foreground pixels are nearest to that same entry (so a two-coloured object is rejected).
"""

from typing import NamedTuple

import jax.numpy as jnp
import ml_collections

from compgen_jax.images import scenes


class Detection(NamedTuple):
  shape: jnp.ndarray   # int [N, K]
  colour: jnp.ndarray  # int [N, K]
  ok: jnp.ndarray      # bool [N, K]: accepted (not blank, not ambiguous)


def default_config() -> ml_collections.ConfigDict:
  """The `detector` config subtree."""
  return ml_collections.ConfigDict(dict(
      iou_min=0.75, margin=0.1, colour_max_dist=0.3, colour_agree=0.6))


def detect(images_NxHxWx3, geo: scenes.Geometry, cfg: ml_collections.ConfigDict) -> Detection:
  """Detects every slot of images in [0, 1]."""
  cells = scenes.cells_of(jnp.asarray(images_NxHxWx3, jnp.float32), geo)  # [N, K, ch, cw, 3]
  fg = (cells.max(-1) > 0.5).astype(jnp.float32)  # [N, K, ch, cw]
  tmpl = jnp.asarray(scenes.placed_templates(geo))  # [S, J, ch, cw]
  inter = jnp.einsum("nkhw,sjhw->nksj", fg, tmpl)
  union = fg.sum((-2, -1))[:, :, None, None] + tmpl.sum((-2, -1))[None, None] - inter
  iou_NxKxS = (inter / jnp.maximum(union, 1.0)).max(-1)
  shape = jnp.argmax(iou_NxKxS, -1)
  top2 = jnp.sort(iou_NxKxS, -1)[..., -2:] if geo.num_shapes > 1 else jnp.concatenate(
      [jnp.zeros_like(iou_NxKxS), iou_NxKxS], -1)
  palette = jnp.asarray(scenes.PALETTE[:geo.num_colours])
  count = fg.sum((-2, -1))
  mean = (cells * fg[..., None]).sum((-3, -2)) / jnp.maximum(count, 1.0)[..., None]  # [N, K, 3]
  dist = jnp.linalg.norm(mean[:, :, None, :] - palette[None, None], axis=-1)  # [N, K, C]
  colour = jnp.argmin(dist, -1)
  pixel_colour = jnp.argmin(
      jnp.linalg.norm(cells[..., None, :] - palette[None, None, None, None], axis=-1), -1)
  agree = ((pixel_colour == colour[..., None, None]) * fg).sum((-2, -1)) / jnp.maximum(count, 1.0)
  ok = ((count > 0) & (top2[..., 1] >= cfg.iou_min) & (top2[..., 1] - top2[..., 0] >= cfg.margin)
        & (dist.min(-1) <= cfg.colour_max_dist) & (agree >= cfg.colour_agree))
  return Detection(shape, colour, ok)


def slot_correct(det: Detection, shapes_NxK, colours_NxK):
  """(shape right, colour right) [N, K] bool each; a rejected slot is wrong on both."""
  return det.ok & (det.shape == shapes_NxK), det.ok & (det.colour == colours_NxK)
