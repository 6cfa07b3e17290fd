"""Image training: a vmapped run equals a solo run, checkpoints round-trip, a resumed run equals
an uninterrupted one, the loss falls, and a bad config is refused before anything is written."""

import os

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax import checkpointing, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.images import train
from compgen_jax.training import chunk as chunk_lib
from compgen_jax.types import ConfigError
from tests.helpers import load_config

jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture(scope="module")
def cfg():
  return load_config("images", "tiny")


def test_vmapped_run_equals_solo_run(cfg):
  grid = train.run_info(cfg, train.run_grid(cfg))
  assert [(r["seed"], r["coverage"]) for r in grid] == [(0, 0.25), (0, 0.5), (1, 0.25), (1, 0.5)]
  keys, cov, splits = train.init_inputs(cfg, grid)
  chunk = train.make_chunk(cfg)
  many, many_metrics, ok = chunk(train.jitted_init(cfg)(keys, cov, splits))
  r = 3
  one, one_metrics, _ = chunk(train.jitted_init(cfg)(
      keys[r:r + 1], cov[r:r + 1], jax.tree.map(lambda a: a[r:r + 1], splits)))
  assert bool(np.all(ok))
  np.testing.assert_array_equal(many.split.train_idx[r], one.split.train_idx[0])
  np.testing.assert_array_equal(many.key[r], one.key[0])
  chex.assert_trees_all_close(jax.tree.map(lambda a: a[r], many.params),
                              jax.tree.map(lambda a: a[0], one.params), atol=1e-5)
  np.testing.assert_allclose(many_metrics["train/loss"][r], one_metrics["train/loss"][0],
                             rtol=1e-5)


def test_images_get_the_engines_cpu_run_mapping(cfg):
  # The engine's "auto" strategy is every family's: on one CPU device the image runs (largest
  # weight >= chunk.MAP_MIN_WEIGHTS) are stepped one after another, so each run's chunk is the
  # one-run program bit for bit, where the vmapped program rounds differently.
  grid = train.run_info(cfg, train.run_grid(cfg))
  inputs = train.init_inputs(cfg, grid)
  init = lambda: train.jitted_init(cfg)(*inputs)  # noqa: E731 - the chunks donate their state
  assert chunk_lib.runs_one_after_another(init().params)
  auto, _, _ = train.make_chunk(cfg)(init())
  vmapped, _, _ = train.make_chunk(cfg, "vmap")(init())
  r = 2
  solo = jax.jit(lambda s: chunk_lib.scan_one_run(s, step=train.step_one(cfg),
                                                  length=cfg.train.chunk_size))
  one, _, _ = solo(jax.tree.map(lambda a: a[r], init()))
  leaves = lambda tree: jax.tree.leaves(jax.tree.map(lambda a: np.asarray(a[r]), tree))  # noqa: E731
  assert all(np.array_equal(a, b) for a, b in zip(leaves(auto.params),
                                                  jax.tree.leaves(one.params), strict=True))
  assert not all(np.array_equal(a, b) for a, b in zip(leaves(vmapped.params),
                                                      leaves(auto.params), strict=True))


def test_checkpoint_round_trip(cfg, tmp_path):
  grid = train.run_grid(cfg)
  state = train.jitted_init(cfg)(*train.init_inputs(cfg, train.run_info(cfg, grid)))
  state = state.replace(step=state.step + 7)
  expected = jax.tree.map(np.asarray, state)  # the state is donated to nothing: copy anyway
  mngr = checkpointing.manager(str(tmp_path / workdir_lib.CHECKPOINT_DIR))
  checkpointing.save(mngr, 7, state)
  mngr.close()
  step, restored = train.restore(cfg, str(tmp_path))
  assert step == 7
  chex.assert_trees_all_equal(jax.tree.map(np.asarray, restored), expected)


def test_resumed_run_equals_uninterrupted_and_loss_falls(cfg, tmp_path):
  full, part = str(tmp_path / "full"), str(tmp_path / "part")
  train.train(cfg, full)
  train.train(cfg, part, stop_after=cfg.train.checkpoint_every)
  assert checkpointing.available_steps(os.path.join(part, workdir_lib.CHECKPOINT_DIR)) == [50]
  train.train(cfg, part)
  rows = {d: metric_writer.read_rows(os.path.join(d, workdir_lib.METRICS_FILE))
          for d in (full, part)}
  assert rows[full] == rows[part]
  _, a = train.restore(cfg, full)
  _, b = train.restore(cfg, part)
  chex.assert_trees_all_equal(jax.tree.map(np.asarray, a.ema), jax.tree.map(np.asarray, b.ema))
  loss = lambda step: np.mean([r["train/loss"] for r in rows[full] if r["step"] == step])
  assert loss(cfg.train.num_steps) < 0.7 * loss(cfg.train.log_every)


@pytest.mark.parametrize("field, value", [("split.coverage", (0.01,)),
                                          ("train.log_every", 7),
                                          ("model.name", "transformer"),
                                          ("flow.cond_dropout", 1.0)])
def test_bad_config_is_refused_before_anything_is_written(field, value, tmp_path):
  bad = load_config("images", "tiny", **{field: value})
  with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
    train.train(bad, str(tmp_path / "wd"))
  assert not os.path.exists(tmp_path / "wd")


def test_render_inside_the_step_matches_the_drawn_combinations(cfg):
  """The training batch is drawn from the run's training combinations only."""
  grid = train.run_info(cfg, train.run_grid(cfg))
  _, _, splits = train.init_inputs(cfg, grid)
  geo = train.scenes.geometry(cfg.scene)
  idx, n = splits.train_idx[0], int(splits.n_train[0])
  shapes, colours, _ = train.draw_scenes(jax.random.key(0), jnp.asarray(idx), n, 256, geo)
  combos = train.scenes.encode_combos(np.asarray(shapes), np.asarray(colours), geo)
  assert set(combos.tolist()) <= set(idx[:n].tolist())


def test_conv_model_shapes_and_finite_loss_gradient():
  cfg = load_config("images", "tiny", **{"model.name": "conv"})
  geo = train.scenes.geometry(cfg.scene)
  params = jax.jit(lambda k: train.model_lib.init(k, cfg.model, geo))(jax.random.key(0))
  x = jax.random.normal(jax.random.key(1), (3, geo.height, geo.width, 3))
  shapes = jnp.zeros((3, geo.num_slots), jnp.int32)
  cond = train.model_lib.condition(shapes, shapes, jnp.ones((3,), bool), geo)
  out, feats = jax.jit(lambda p: train.model_lib.apply(p, x, jnp.full((3,), 0.5), cond,
                                                       cfg.model, geo))(params)
  chex.assert_shape(out, x.shape)
  c = cfg.model.channels
  chex.assert_shape(feats, [(3, geo.num_slots * w) for w in (c, 2 * c, 2 * c, 2 * c, c)])
  grads = jax.jit(jax.grad(lambda p: train.model_lib.flow_loss(
      p, x, jnp.full((3,), 0.5), x, cond, cfg.model, geo)))(params)
  assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))
