"""Invertible NN encoding: a stack of affine coupling layers with a fixed random init."""

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import ml_collections

from compgen_jax.types import Array, PRNGKey, PyTree


def invertible_init(key: PRNGKey, M: int, cfg: ml_collections.ConfigDict) -> PyTree:
  """Coupling MLPs stacked on a leading layer axis L: weights N(0,1)*scale, biases zero (as the
  reference's create_coupling_layer). Each layer conditions on the first A = M // 2 entries and
  moves the other M - A."""
  return _init(key, M, cfg.inn_layers, cfg.inn_hidden_mult * M, float(cfg.inn_init_scale))


# One compiled program instead of one eager dispatch (and compile) per random draw.
@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4))
def _init(key: PRNGKey, M: int, L: int, H: int, scale: float) -> PyTree:
  A = M // 2
  shapes = {"w0": (L, A, H), "w1": (L, H, H), "w2": (L, H, 2 * (M - A))}
  # One draw cut into pieces: each separate draw adds a threefry to compile (seconds on CPU).
  sizes = [math.prod(shape) for shape in shapes.values()]
  flat = scale * jax.random.normal(key, (sum(sizes),), jnp.float32)
  pieces = jnp.split(flat, list(itertools.accumulate(sizes))[:-1])
  params = {name: piece.reshape(shape)
            for (name, shape), piece in zip(shapes.items(), pieces, strict=True)}
  params.update({f"b{i}": jnp.zeros((L, shapes[f"w{i}"][-1]), jnp.float32) for i in range(3)})
  return params


def _scale_shift(layer: PyTree, x1_A: Array) -> tuple[Array, Array]:
  """Scale in [0.5, 1.5] (never 0, so the layer is invertible) and shift of the moved half."""
  h_H = jax.nn.sigmoid(x1_A @ layer["w0"] + layer["b0"])
  h_H = jax.nn.sigmoid(h_H @ layer["w1"] + layer["b1"])
  s_raw, shift = jnp.split(h_H @ layer["w2"] + layer["b2"], 2)
  return 0.5 * jnp.tanh(s_raw) + 1.0, shift


def _layers(params: PyTree) -> list[PyTree]:
  num_layers = params["w0"].shape[0]
  return [jax.tree.map(lambda p, l=l: p[l], params) for l in range(num_layers)]


def _forward_one(params: PyTree, x_M: Array) -> Array:
  A = params["w0"].shape[1]
  for l, layer in enumerate(_layers(params)):
    # Odd layers act on the reversed vector so that both halves get transformed.
    x_M = x_M[::-1] if l % 2 else x_M
    scale, shift = _scale_shift(layer, x_M[:A])
    x_M = jnp.concatenate([x_M[:A], x_M[A:] * scale + shift])
    x_M = x_M[::-1] if l % 2 else x_M
  return x_M


def _inverse_one(params: PyTree, y_M: Array) -> Array:
  A = params["w0"].shape[1]
  for l, layer in reversed(list(enumerate(_layers(params)))):
    y_M = y_M[::-1] if l % 2 else y_M
    scale, shift = _scale_shift(layer, y_M[:A])
    y_M = jnp.concatenate([y_M[:A], (y_M[A:] - shift) / scale])
    y_M = y_M[::-1] if l % 2 else y_M
  return y_M


def invertible_apply(params: PyTree, z_BxM: Array, context_BxCxF: Array | None) -> Array:
  """phi(z): the coupling stack applied to every row of z."""
  del context_BxCxF
  z_BxM = jnp.asarray(z_BxM, jnp.float32)
  return jax.vmap(_forward_one, in_axes=(None, 0))(params, z_BxM)


def invertible_inverse(params: PyTree, phi_BxM: Array) -> Array:
  """The exact inverse of invertible_apply (up to float rounding)."""
  phi_BxM = jnp.asarray(phi_BxM, jnp.float32)
  return jax.vmap(_inverse_one, in_axes=(None, 0))(params, phi_BxM)
