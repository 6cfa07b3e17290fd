"""The MLP student: its first layer (task part once per task) against the plain concatenation."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from compgen_jax.students import mlp
from compgen_jax.students import registry as students


def _cfg(widths):
  """The `student.mlp` subsection with these hidden widths."""
  cfg = students.default_config().mlp
  cfg.widths = widths
  return cfg


def _numpy_mlp(params, phi_BxE, x_BxNxI, widths):
  """float64 forward on concat(phi, x), written independently of the module."""
  B, N, _ = x_BxNxI.shape
  h = np.concatenate([np.broadcast_to(phi_BxE[:, None], (B, N, phi_BxE.shape[-1])), x_BxNxI], -1)
  acts = []
  for name in [f"dense_{i}" for i in range(len(widths))] + ["readout"]:
    layer = params[name]
    h = h @ np.asarray(layer["kernel"], np.float64) + np.asarray(layer["bias"], np.float64)
    acts.append(h)
    if name != "readout":
      h = np.maximum(h, 0.0)
  return h, acts


def test_forward_and_activations_match_concatenated_inputs():
  widths, E, I, O = (32, 16), 6, 5, 3
  params = mlp.init(jax.random.key(0), E, I, O, _cfg(widths))
  # Non-zero biases so the task-part bias is exercised.
  params = jax.tree.map(lambda p: p + 0.1 * jax.random.normal(jax.random.key(1), p.shape), params)
  phi = np.asarray(jax.random.normal(jax.random.key(2), (4, E)), np.float64)
  x = np.asarray(jax.random.normal(jax.random.key(3), (4, 7, I)), np.float64)
  y, acts = mlp.apply(params, jnp.asarray(phi, jnp.float32), jnp.asarray(x, jnp.float32), O,
                      _cfg(widths))
  y_ref, acts_ref = _numpy_mlp(params, phi, x, widths)
  np.testing.assert_allclose(y, y_ref, rtol=1e-4, atol=1e-5)
  for a, a_ref in zip(acts.values(), acts_ref, strict=True):
    assert a.shape == a_ref.shape
    np.testing.assert_allclose(a, a_ref, rtol=1e-4, atol=1e-5)


def test_initial_parameters_are_a_dense_layer_on_the_concatenation():
  """Same names, shapes and values as nn.Dense on concat(phi, x): checkpoints and probes of runs
  trained before the factored first layer still load and mean the same."""
  E, I, width = 6, 5, 32
  params = mlp.init(jax.random.key(7), E, I, 3, _cfg((width, width)))
  assert params["dense_0"]["kernel"].shape == (E + I, width)
  assert params["dense_0"]["bias"].shape == (width,)

  class Plain(nn.Module):  # the layout before the change: Dense layers on the concatenation
    @nn.compact
    def __call__(self, h):
      for i in range(2):
        h = nn.relu(nn.Dense(width, name=f"dense_{i}")(h))
      return nn.Dense(3, name="readout")(h)

  plain = Plain().init(jax.random.key(7), jnp.zeros((1, 1, E + I)))["params"]
  same = jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)), params, plain)
  assert all(jax.tree.leaves(same)), same


def test_gradients_match_concatenated_inputs():
  widths, E, I, O = (16,), 4, 3, 2
  params = mlp.init(jax.random.key(0), E, I, O, _cfg(widths))
  phi = jax.random.normal(jax.random.key(2), (3, E))
  x = jax.random.normal(jax.random.key(3), (3, 5, I))

  def loss_factored(p):
    return jnp.sum(mlp.apply(p, phi, x, O, _cfg(widths))[0] ** 2)

  def loss_concat(p):
    h = jnp.concatenate([jnp.broadcast_to(phi[:, None], (3, 5, E)), x], -1)
    h = jax.nn.relu(h @ p["dense_0"]["kernel"] + p["dense_0"]["bias"][None, None])
    return jnp.sum((h @ p["readout"]["kernel"] + p["readout"]["bias"][None, None]) ** 2)

  g1, g2 = jax.grad(loss_factored)(params), jax.grad(loss_concat)(params)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), g1, g2)
