"""Scenes and detector: the gather renderer equals a pixel-painting numpy renderer; the detector
is right on every clean and noisy render and rejects blank or ambiguous cells."""

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from compgen_jax.images import detector, scenes, split
from compgen_jax.types import ConfigError

jax.config.update("jax_numpy_rank_promotion", "raise")


def _geo(**kw):
  cfg = scenes.default_config()
  cfg.update(kw)
  return scenes.geometry(cfg)


def _numpy_render(shapes, colours, offsets, geo):
  """Paints each object's pixels one by one (no table, no gather)."""
  img = np.zeros((len(shapes), geo.height, geo.width, 3), np.float32)
  for b in range(len(shapes)):
    for k in range(geo.num_slots):
      row, col = divmod(k, geo.cols)
      dy, dx = divmod(int(offsets[b, k]), geo.jitter)
      y0, x0 = row * geo.cell_h + geo.top + dy, col * geo.cell_w + geo.left + dx
      for i in range(scenes.PATCH):
        for j in range(scenes.PATCH):
          if scenes.TEMPLATES[shapes[b, k], i, j]:
            img[b, y0 + i, x0 + j] = scenes.PALETTE[colours[b, k]]
  return img


def _random_scenes(geo, n, seed):
  rng = np.random.default_rng(seed)
  return (rng.integers(0, geo.num_shapes, (n, geo.num_slots)),
          rng.integers(0, geo.num_colours, (n, geo.num_slots)),
          rng.integers(0, geo.num_offsets, (n, geo.num_slots)))


GEOMETRIES = [dict(), dict(image_size=16, grid=(2, 2), num_shapes=8, num_colours=8, jitter=4),
              dict(image_size=24, grid=(2, 3), num_shapes=5, num_colours=3, jitter=2)]


@pytest.mark.parametrize("jit", [True, False])
@pytest.mark.parametrize("kw", GEOMETRIES)
def test_gather_renderer_equals_numpy_painter(kw, jit):
  geo = _geo(**kw)
  shapes, colours, offsets = _random_scenes(geo, 16, 0)
  table = scenes.cell_table(geo)
  render = lambda s, c, o: scenes.render(table, s, c, o, geo)
  got = np.asarray((jax.jit(render) if jit else render)(shapes, colours, offsets))
  chex.assert_shape(got, (16, geo.height, geo.width, 3))
  np.testing.assert_array_equal(got, _numpy_render(shapes, colours, offsets, geo))
  np.testing.assert_array_equal(np.asarray(scenes.cells_of(got, geo)).reshape(16, -1).sum(1),
                                got.reshape(16, -1).sum(1))


def test_combination_codes_round_trip_and_match_the_split_table():
  geo = _geo(grid=(2, 2), num_shapes=3, num_colours=2, jitter=2)
  idx = np.arange(geo.num_combos)
  shapes, colours = (np.asarray(a) for a in scenes.decode_combos(jnp.asarray(idx), geo))
  attrs = split.attributes(geo)
  np.testing.assert_array_equal(shapes, attrs[..., 0])
  np.testing.assert_array_equal(colours, attrs[..., 1])
  np.testing.assert_array_equal(scenes.encode_combos(shapes, colours, geo), idx)
  assert len({tuple(a.ravel()) for a in attrs}) == geo.num_combos


def test_different_shapes_overlap_little_at_every_relative_offset():
  t = scenes.TEMPLATES
  worst = 0.0
  for a in range(len(t)):
    for b in range(len(t)):
      for dy in range(-4, 5):
        for dx in range(-4, 5):
          if a == b:
            continue
          pa = np.pad(t[a], 5)
          pb = np.roll(np.roll(np.pad(t[b], 5), dy, 0), dx, 1)
          worst = max(worst, (pa * pb).sum() / np.maximum(pa, pb).sum())
  assert worst < 0.65


@pytest.mark.parametrize("noise", [0.0, 0.1])
def test_detector_is_right_on_every_clean_and_noisy_render(noise):
  geo = _geo(image_size=16, grid=(2, 2), num_shapes=8, num_colours=8, jitter=4)
  s, c, o = np.meshgrid(np.arange(8), np.arange(8), np.arange(geo.num_offsets), indexing="ij")
  s, c, o = (a.reshape(-1, 1).repeat(geo.num_slots, 1) for a in (s, c, o))
  # every (shape, colour, offset) in every slot; other slots shuffled so slots differ
  rng = np.random.default_rng(1)
  for k in range(1, geo.num_slots):
    perm = rng.permutation(len(s))
    s[:, k], c[:, k], o[:, k] = s[perm, k], c[perm, k], o[perm, k]
  img = np.asarray(scenes.render(scenes.cell_table(geo), s, c, o, geo))
  img = np.clip(img + noise * rng.normal(size=img.shape), 0, 1)
  det = jax.jit(lambda x: detector.detect(x, geo, detector.default_config()))(img)
  assert bool(np.all(det.ok))
  np.testing.assert_array_equal(det.shape, s)
  np.testing.assert_array_equal(det.colour, c)


def test_detector_rejects_blank_and_ambiguous_cells():
  geo = _geo(image_size=16, grid=(1, 2), num_shapes=8, num_colours=8, jitter=3)
  cfg = detector.default_config()
  table = scenes.cell_table(geo)
  one = lambda s, c, o: np.asarray(scenes.render(table, np.array([[s, s]]), np.array([[c, c]]),
                                                 np.array([[o, o]]), geo)).copy()[0]
  blank = np.zeros((geo.height, geo.width, 3), np.float32)
  union = np.maximum(one(1, 0, 0), one(2, 0, 4))        # plus and cross on top of each other
  two_colour = one(0, 0, 4)                             # a square, half red half blue
  two_colour[:, :, :] = np.where(np.arange(geo.height)[:, None, None] < geo.height // 2,
                                 two_colour, two_colour[..., ::-1])
  grey = one(0, 6, 4) * 0.6                             # white square at 0.6: no palette colour
  faint = one(0, 0, 4) * 0.4                            # below the foreground threshold: blank
  det = detector.detect(np.stack([blank, union, two_colour, grey, faint]), geo, cfg)
  assert not np.any(np.asarray(det.ok)), np.asarray(det.ok)
  ok = detector.detect(one(3, 2, 1)[None], geo, cfg)
  assert bool(np.all(ok.ok)) and int(ok.shape[0, 0]) == 3 and int(ok.colour[0, 1]) == 2


@pytest.mark.parametrize("field, value", [("num_shapes", 9), ("num_colours", 0),
                                          ("grid", (3, 2)), ("jitter", 9)])
def test_bad_scene_config_names_the_field(field, value):
  cfg = ml_collections.ConfigDict(scenes.default_config().to_dict())
  cfg[field] = value
  with pytest.raises(ConfigError, match=f"scene.{field}"):
    scenes.geometry(cfg)
