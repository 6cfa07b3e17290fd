"""The preference family: batch shapes and invariants, the masked classification loss, config
checks (few-shot is rejected), and learning above chance on the tiny preset."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax.encodings import registry as encodings
from compgen_jax.scaling import runs
from compgen_jax.scaling import state as run_state
from compgen_jax.scaling import train as scaling_train
from compgen_jax.tasks import gridworld as gw
from compgen_jax.tasks import latents, losses, preference
from compgen_jax.tasks import registry as families
from compgen_jax.types import ConfigError
from tests.helpers import load_config

B, M, F = 64, 6, 8


def _cfg(**kw):
  cfg = preference.default_config()
  cfg.update(dict(num_modules=M, max_hotness=2, num_features=F), **kw)
  return cfg


@pytest.fixture(scope="module")
def sampled():
  cfg = _cfg()
  params = preference.init(jax.random.key(0), cfg)
  bits = jax.random.randint(jax.random.key(1), (B,), 1, 2 ** M)
  khot = latents.khot_from_bits(bits, M)
  sample = jax.jit(lambda k: preference.sample_batch(params, khot, k, cfg))
  return cfg, params, khot, sample, sample(jax.random.key(2))


def test_batch_shapes_and_dims(sampled):
  cfg, _, _, _, batch = sampled
  N, D = cfg.horizon, 49 * (F + 2)
  assert preference.x_dim(cfg) == D and preference.out_dim(cfg) == 5
  chex.assert_shape(batch.x, (B, N, D))
  chex.assert_shape([batch.y, batch.mask, batch.reward], (B, N))
  chex.assert_shape([batch.z, batch.khot], (B, M))
  assert batch.y.dtype == jnp.int32 and batch.mask.dtype == jnp.bool_ and batch.context is None
  np.testing.assert_allclose(jnp.sqrt(jnp.mean(batch.x ** 2, -1)), 1.0, rtol=1e-4)


def test_latent_is_weighted_khot_without_sqrt_k(sampled):
  _, _, khot, _, batch = sampled
  np.testing.assert_array_equal(batch.z > 0, khot > 0)
  active = np.asarray(batch.z)[np.asarray(khot) > 0]
  gap = np.abs(active[:, None] - latents.DISCRETE_WEIGHTS[None, :]).min(1)
  assert (gap < 1e-6).all()  # no 1/sqrt(K) scaling, unlike the hyperteacher


def test_demonstrations_are_deterministic_for_a_key(sampled):
  _, _, _, sample, batch = sampled
  chex.assert_trees_all_equal(sample(jax.random.key(2)), batch)
  other = sample(jax.random.key(3))
  assert not np.array_equal(other.x, batch.x)


def test_mask_is_a_prefix_ending_at_nothing_or_the_horizon(sampled):
  _, _, _, _, batch = sampled
  mask, y = np.asarray(batch.mask), np.asarray(batch.y)
  assert mask[:, 0].all()
  assert (np.diff(mask.astype(int), axis=1) <= 0).all()
  length = mask.sum(1)
  ended = length < mask.shape[1]
  assert (y[np.arange(B), length - 1][ended] == gw.NOTHING).all()
  assert (y[mask & (np.cumsum(y == gw.NOTHING, 1) > 0) & (y != gw.NOTHING)].size == 0)
  assert (y[~mask] == gw.NOTHING).all() and (np.asarray(batch.reward)[~mask] == 0).all()
  assert 0 < ended.mean() < 1  # both kinds occur


def test_observation_shows_scene_and_walls(sampled):
  cfg, _, _, _, batch = sampled
  grid = np.asarray(batch.x[:, 0]).reshape(B, 7, 7, F + 2) > 0
  np.testing.assert_array_equal(grid[..., -1], np.broadcast_to(gw.WALLS_7x7, (B, 7, 7)))
  assert (grid[..., -2].sum((1, 2)) == 1).all()  # one agent
  assert (grid[..., :F].sum((1, 2, 3)) == cfg.num_objects).all()  # distinct cells, one feature
  assert not (grid[..., -2] & grid[..., :F].any(-1)).any()  # agent not on an object
  assert not (grid[..., :-1].any(-1) & gw.WALLS_7x7).any()  # nothing inside walls


def test_rewards_are_object_values_z_times_basis(sampled):
  _, params, _, _, batch = sampled
  values_BxF = np.asarray(preference.feature_values(params, batch.z))
  reward = np.asarray(batch.reward)
  for b, t in zip(*np.nonzero(reward), strict=True):
    assert np.isclose(values_BxF[b], reward[b, t], atol=1e-5).any()
  np.testing.assert_allclose(values_BxF, np.asarray(batch.z) @ np.asarray(params["basis"]),
                             rtol=1e-5, atol=1e-5)


def test_masked_classification_loss_by_hand():
  y = jnp.asarray([[1, 0, 0], [2, 3, 0]])
  mask = jnp.asarray([[True, True, False], [True, True, True]])
  pred = jax.nn.one_hot(jnp.asarray([[1, 0, 4], [2, 1, 0]]), 5) * 10.0
  batch = preference.Batch(None, None, None, y, mask, None, None)
  loss, m = jax.jit(losses.masked_classification_loss)(pred, batch)
  assert m["acc"] == pytest.approx(4 / 5)  # the masked wrong step does not count
  assert m["acc_all"] == pytest.approx(1 / 2)
  nll = -jax.nn.log_softmax(pred, -1)
  picked = jnp.take_along_axis(nll, y[..., None], -1)[..., 0]
  assert loss == pytest.approx(float((picked * mask).sum() / 5), rel=1e-6)


def test_config_errors_name_the_field():
  with pytest.raises(ConfigError, match="task.num_modules"):
    preference.validate(_cfg(num_modules=9))
  with pytest.raises(ConfigError, match="task.num_objects"):
    preference.validate(_cfg(num_objects=0))
  with pytest.raises(ConfigError, match="task.num_objects"):
    preference.validate(_cfg(num_objects=9))
  with pytest.raises(ConfigError, match="task.discount"):
    preference.validate(_cfg(discount=0.0))
  with pytest.raises(ConfigError, match="task.weights"):
    preference.validate(_cfg(weights="gaussian"))
  with pytest.raises(ConfigError, match="task.family"):
    families.get("prefernce")


def test_few_shot_is_rejected_before_compiling():
  cfg = load_config("preference", "tiny", **{"encoding.name": "few_shot"})
  with pytest.raises(ConfigError, match="encoding.name"):
    runs.validate(cfg)
  with pytest.raises(ConfigError, match="encoding.name"):
    preference.sample_batch({}, jnp.ones((1, 4)), jax.random.key(0), cfg.task, num_shots=5)


@pytest.mark.parametrize("name", [n for n in encodings.REGISTRY if n != "few_shot"])
def test_every_other_encoding_applies(name):
  cfg = load_config("preference", "tiny", **{"encoding.name": name})
  runs.validate(cfg)
  enc_dim, x_dim, out_dim, ctx = run_state.dims(cfg)
  assert (x_dim, out_dim, ctx) == (49 * (cfg.task.num_features + 2), 5, 0) and enc_dim > 0


@pytest.mark.parametrize("preset", ["paper", "quick"])
def test_presets_validate(preset):
  cfg = load_config("preference", preset)
  runs.validate(cfg)
  assert cfg.task.family == "preference"


def test_tiny_preset_learns_above_chance(tmp_path):
  cfg = load_config("preference", "tiny")
  rows = scaling_train.train_and_evaluate(cfg, str(tmp_path))
  assert len(rows) == cfg.num_seeds
  # Chance is 0.2 (5 actions); the most frequent expert action is about a quarter of all steps.
  assert np.mean([r["id/acc"] for r in rows]) > 0.45
  assert np.mean([r["ood/acc"] for r in rows]) > 0.4
  assert all(0.0 <= r["ood/acc_all"] <= 1.0 for r in rows)
