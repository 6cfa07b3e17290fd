"""Transformer student: causal, RoPE depends on relative position only, PAD masked, validation."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax.students import registry as students
from compgen_jax.students import transformer
from compgen_jax.types import ConfigError

B, N, I, O, E = 3, 5, 4, 2, 6


def _cfg(**overrides):
  cfg = students.default_config()
  cfg.update(dict(name="transformer", num_layers=2, d_model=16, num_heads=2, ffw_dim=32))
  cfg.update(overrides)
  return cfg


def _x(seed, shape=(B, N, I)):
  return jnp.asarray(np.random.default_rng(seed).uniform(-1, 1, shape), jnp.float32)


@pytest.fixture(scope="module")
def vector_model():
  cfg = _cfg()
  params = transformer.init(jax.random.key(0), E, I, O, cfg)
  return params, jax.jit(lambda p, phi, x: transformer.apply(p, phi, x, O, cfg))


def test_shapes_and_activation_names(vector_model):
  params, apply = vector_model
  y, acts = apply(params, _x(0, (B, E)), _x(1))
  chex.assert_shape(y, (B, N, O))
  assert list(acts) == ["block_0", "block_1", "readout"]
  chex.assert_shape([acts["block_0"], acts["block_1"]], (B, N, 16))
  chex.assert_trees_all_equal(acts["readout"], y)
  chex.assert_tree_all_finite(acts)


def test_causal(vector_model):
  params, apply = vector_model
  phi, x = _x(0, (B, E)), _x(1)
  j = 2
  x_changed = x.at[:, j].set(_x(2, (B, I)))
  (y, acts), (y2, acts2) = apply(params, phi, x), apply(params, phi, x_changed)
  # Positions before j never see x_j ...
  chex.assert_trees_all_close(y2[:, :j], y[:, :j], atol=1e-6)
  chex.assert_trees_all_close(acts2["block_0"][:, :j], acts["block_0"][:, :j], atol=1e-6)
  # ... while j and later do.
  assert np.all(np.abs(np.asarray(y2[:, j:] - y[:, j:])).max(axis=(0, 2)) > 1e-4)
  # And every position sees the task encoding.
  y3, _ = apply(params, phi + 1.0, x)
  assert np.all(np.abs(np.asarray(y3 - y)).max(axis=(0, 2)) > 1e-4)


def test_rope_relative_position():
  rng = np.random.default_rng(0)
  q = jnp.asarray(rng.normal(size=(1, 1, 1, 8)), jnp.float32)
  k = jnp.asarray(rng.normal(size=(1, 1, 1, 8)), jnp.float32)

  def score(m, n):
    qm = transformer.rope(q, jnp.array([m]), 10_000.0)
    kn = transformer.rope(k, jnp.array([n]), 10_000.0)
    return float(jnp.sum(qm * kn))

  for m, n, shift in ((3, 1, 5), (0, 7, 11), (4, 4, 2)):
    np.testing.assert_allclose(score(m + shift, n + shift), score(m, n), rtol=1e-4, atol=1e-5)
  assert abs(score(3, 1) - score(1, 3)) > 1e-3  # the relative offset itself matters
  # A rotation: norms are kept.
  rotated = transformer.rope(q, jnp.array([9]), 10_000.0)
  np.testing.assert_allclose(jnp.linalg.norm(rotated), jnp.linalg.norm(q), rtol=1e-5)


def test_token_input_masks_pad():
  cfg, V, L = _cfg(), 9, 4
  params = transformer.init(jax.random.key(1), L, I, O, cfg, vocab_size=V)
  assert params["enc_embed"]["embedding"].shape == (V, 16)
  apply = jax.jit(lambda p, t, x: transformer.apply(p, t, x, O, cfg))
  tokens = jnp.array([[3, 5, 0, 0], [1, 8, 2, 6], [4, 7, 0, 0]], jnp.float32)
  x = _x(3)
  y, _ = apply(params, tokens, x)
  chex.assert_shape(y, (B, N, O))
  # Changing the PAD embedding changes nothing: PAD keys are masked.
  moved = jax.tree.map(lambda a: a, params)
  moved["enc_embed"]["embedding"] = params["enc_embed"]["embedding"].at[0].add(3.0)
  y_moved, _ = apply(moved, tokens, x)
  chex.assert_trees_all_close(y_moved, y, atol=1e-5)
  # A real token matters.
  y_other, _ = apply(params, tokens.at[0, 1].set(6.0), x)
  assert float(jnp.abs(y_other[0] - y[0]).max()) > 1e-4


@pytest.mark.parametrize("overrides, field", [
    (dict(d_model=18, num_heads=4), "student.d_model"),  # not a multiple
    (dict(d_model=12, num_heads=4), "student.d_model"),  # head dim 3 is odd: no RoPE pairs
    (dict(num_layers=0), "student.num_layers"),
    (dict(rope_base=0.0), "student.rope_base"),
    (dict(name="rnn"), "student.name"),
])
def test_validation_names_the_field(overrides, field):
  with pytest.raises(ConfigError) as err:
    students.validate(_cfg(**overrides))
  assert err.value.field == field


def test_default_config_is_valid_for_every_student():
  for name in students.REGISTRY:
    cfg = students.default_config()
    cfg.name = name
    students.validate(cfg)
