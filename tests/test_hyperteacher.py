"""The teacher equals its formula; latents follow the paper's weight kinds; streams differ."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax import rng
from compgen_jax.tasks import hyperteacher
from compgen_jax.types import ConfigError


def _cfg(**kw):
  cfg = hyperteacher.default_config()
  cfg.update(dict(num_modules=6, max_hotness=2, input_dim=5, hidden_dim=7, output_dim=3,
                  num_samples=4), **kw)
  return cfg


def _numpy_teacher(params, z, x, K):
  """y = relu(... relu(x W_1 + b_1) ...) Omega, W_l = sum_m z_m / sqrt(K) Theta_m^l, per task."""
  zt = np.asarray(z, np.float64) / np.sqrt(K)
  ys = []
  for b in range(zt.shape[0]):
    a = np.asarray(x[b], np.float64)
    for theta, beta in zip(params["theta"], params["beta"], strict=True):
      w = sum(zt[b, m] * np.asarray(theta[m], np.float64) for m in range(zt.shape[1]))
      bias = sum(zt[b, m] * np.asarray(beta[m], np.float64) for m in range(zt.shape[1]))
      a = np.maximum(a @ w + bias, 0.0)
    ys.append(a @ np.asarray(params["omega"], np.float64))
  return np.stack(ys)


def test_teacher_equals_numpy_formula():
  cfg = _cfg()
  params = hyperteacher.init(jax.random.key(0), cfg)
  khot = hyperteacher.khot_from_bits(jnp.asarray([0b000011, 0b100000, 0b010100]), 6)
  z = hyperteacher.sample_latent(jax.random.key(1), khot, "discrete")
  x = jax.random.uniform(jax.random.key(2), (3, 4, 5), minval=-1, maxval=1)
  got = hyperteacher.apply(params, z, x, cfg.max_hotness)
  np.testing.assert_allclose(got, _numpy_teacher(params, z, x, 2), rtol=1e-5, atol=1e-5)


def test_shapes_and_init_statistics():
  params = hyperteacher.init(jax.random.key(0), _cfg(num_modules=16, input_dim=16,
                                                     hidden_dim=16, output_dim=16))
  assert params["theta"][0].shape == (16, 16, 16)
  assert params["beta"][0].shape == (16, 16)
  assert params["omega"].shape == (16, 16)
  beta = np.asarray(params["beta"][0])
  assert beta.min() >= 0.0 and beta.max() < 0.5
  # variance scaling (scale sqrt 3, fan_in = M * d_in for the stacked modules).
  assert np.var(np.asarray(params["theta"][0])) == pytest.approx(np.sqrt(3) / 256, rel=0.15)


def test_weights_and_biases_use_separate_streams():
  cfg = _cfg()
  key = jax.random.key(0)
  params = hyperteacher.init(key, cfg)
  key_b = jax.random.split(rng.stream(key, "teacher_biases"), 1)[0]
  np.testing.assert_array_equal(params["beta"][0],
                                jax.random.uniform(key_b, (6, 7), maxval=0.5))
  other = hyperteacher.init(jax.random.key(1), cfg)
  assert not np.allclose(params["theta"][0], other["theta"][0])


@pytest.mark.parametrize("kind", hyperteacher.WEIGHT_KINDS)
def test_latent_kinds(kind):
  khot = hyperteacher.khot_from_bits(jnp.arange(1, 64), 6)
  z = np.asarray(hyperteacher.sample_latent(jax.random.key(3), khot, kind))
  active = np.asarray(khot) > 0
  assert np.all(z[~active] == 0)
  if kind == "khot":
    assert np.all(z[active] == 1)
  elif kind == "discrete":
    allowed = set(np.round(hyperteacher.DISCRETE_WEIGHTS, 4))
    assert set(np.round(z[active].astype(float), 4)) <= allowed
  else:
    assert np.all((z[active] > 0.5) & (z[active] < 1.0))


def test_multi_layer_teacher_shapes():
  cfg = _cfg(num_hidden_layers=3)
  params = hyperteacher.init(jax.random.key(0), cfg)
  assert len(params["theta"]) == 3
  khot = hyperteacher.khot_from_bits(jnp.asarray([3, 5]), 6)
  batch = hyperteacher.sample_batch(params, khot, jax.random.key(1), cfg, num_shots=10)
  assert batch.y.shape == (2, 4, 3)
  assert batch.context.shape == (2, 10, 8)


def test_train_test_ood_streams_differ():
  key = jax.random.key(0)
  names = ["train", "test", "ood", "ood_hotness", "probe", "split", "encoding", "student"]
  data = {n: tuple(np.asarray(jax.random.key_data(rng.stream(key, n)))) for n in names}
  assert len(set(data.values())) == len(names)
  cfg = _cfg()
  params = hyperteacher.init(key, cfg)
  khot = hyperteacher.khot_from_bits(jnp.asarray([3, 5]), 6)
  xs = [hyperteacher.sample_batch(params, khot, rng.stream(key, n), cfg).x for n in names[:3]]
  assert not np.allclose(xs[0], xs[1]) and not np.allclose(xs[1], xs[2])


def test_bad_task_config_raises():
  with pytest.raises(ConfigError, match="task.weights"):
    hyperteacher.validate(_cfg(weights="binary"))
  with pytest.raises(ConfigError, match="task.num_samples"):
    hyperteacher.validate(_cfg(num_samples=1))
