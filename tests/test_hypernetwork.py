"""Hypernetwork student: shapes, the generated MLP computed by hand (with the reference's
truncated-normal variance correction), validation."""

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
import scipy.stats

from compgen_jax.students import hypernetwork
from compgen_jax.students import registry as students
from compgen_jax.types import ConfigError

B, N, I, O, E, H = 3, 4, 5, 2, 6, 7


def _cfg(**overrides):
  """The `student.hypernetwork` subsection; a fresh dict: ConfigDict's type safety would refuse
  the ill-typed values tests feed in."""
  return ml_collections.ConfigDict(
      {**students.default_config().hypernetwork.to_dict(), "hidden": H, **overrides})


def _section(**overrides):
  """The `student` section of the hypernetwork with _cfg(**overrides)."""
  return ml_collections.ConfigDict({**students.default_config().to_dict(), "name": "hypernetwork",
                                    "hypernetwork": _cfg(**overrides).to_dict()})


def _data(seed):
  rng = np.random.default_rng(seed)
  phi = jnp.asarray(rng.normal(size=(B, E)), jnp.float32)
  x = jnp.asarray(rng.uniform(-1, 1, (B, N, I)), jnp.float32)
  return phi, x


def test_shapes():
  cfg = _cfg()
  params = hypernetwork.init(jax.random.key(0), E, I, O, cfg)
  P = hypernetwork.num_generated(I, H, O)
  assert P == I * H + H + H * O + O
  chex.assert_shape(params["generator"]["kernel"], (E, P))
  chex.assert_shape(params["ln"]["scale"], (E,))
  y, acts = hypernetwork.apply(params, *_data(1), O, cfg)
  chex.assert_shape(y, (B, N, O))
  assert list(acts) == ["generated", "hidden", "readout"]
  chex.assert_shape([acts["generated"], acts["hidden"]], [(B, N, P), (B, N, H)])
  chex.assert_trees_all_equal(acts["readout"], y)


def test_truncated_normal_correction_is_the_std_of_the_truncated_normal():
  """The reference's VarianceScaledKernel divides by the std of N(0, 1) truncated to (-2, 2)."""
  want = scipy.stats.truncnorm(-2.0, 2.0).std()
  np.testing.assert_allclose(hypernetwork.TRUNC_STD, want, rtol=1e-12)
  draws = jax.random.truncated_normal(jax.random.key(0), -2.0, 2.0, (200_000,))
  np.testing.assert_allclose(float(jnp.std(draws)), hypernetwork.TRUNC_STD, rtol=5e-3)


def test_generated_mlp_matches_hand_computation():
  cfg = _cfg()
  params = hypernetwork.init(jax.random.key(2), E, I, O, cfg)
  phi, x = _data(3)
  y, acts = jax.jit(lambda p, f, x: hypernetwork.apply(p, f, x, O, cfg))(params, phi, x)
  phi_np, x_np = np.asarray(phi, np.float64), np.asarray(x, np.float64)
  ln = (phi_np - phi_np.mean(-1, keepdims=True)) / np.sqrt(phi_np.var(-1, keepdims=True) + 1e-6)
  g = ln @ np.asarray(params["generator"]["kernel"]) + np.asarray(params["generator"]["bias"])
  # The reference (VarianceScaledKernel, fan_in, truncated_normal): a generated matrix times
  # sqrt(1 / fan_in) / std(N(0, 1) truncated to (-2, 2)); generated biases as they are.
  c = scipy.stats.truncnorm(-2.0, 2.0).std()
  for b in range(B):
    w1 = g[b, :I * H].reshape(I, H) / (np.sqrt(I) * c)
    b1 = g[b, I * H:I * H + H]
    w2 = g[b, I * H + H:I * H + H + H * O].reshape(H, O) / (np.sqrt(H) * c)
    b2 = g[b, -O:]
    want = np.maximum(x_np[b] @ w1 + b1, 0.0) @ w2 + b2
    np.testing.assert_allclose(np.asarray(y[b]), want, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(np.asarray(acts["generated"][b, -1]), g[b], rtol=1e-3, atol=1e-4)
  # Outputs are O(1) at init: the fan-in scaling of the generated weights.
  assert 0.05 < float(jnp.std(y)) < 5.0


@pytest.mark.parametrize("overrides, field", [
    (dict(hidden=0), "student.hypernetwork.hidden"),
    (dict(layernorm="no"), "student.hypernetwork.layernorm"),
])
def test_validation(overrides, field):
  students.validate(_section())
  with pytest.raises(ConfigError) as err:
    students.validate(_section(**overrides))
  assert err.value.field == field


def test_layernorm_erases_the_scale_of_phi():
  phi, x = _data(4)
  for layernorm, same in ((True, True), (False, False)):
    cfg = _cfg(layernorm=layernorm)
    params = hypernetwork.init(jax.random.key(5), E, I, O, cfg)
    y, _ = hypernetwork.apply(params, phi, x, O, cfg)
    y2, _ = hypernetwork.apply(params, 2.0 * phi, x, O, cfg)
    assert np.allclose(y2, y, atol=1e-4) == same
  assert "ln" not in hypernetwork.init(jax.random.key(5), E, I, O, _cfg(layernorm=False))
