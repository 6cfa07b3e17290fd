"""Task arithmetic and weight averaging over parameter pytrees."""

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp

from compgen_jax.types import PyTree


def task_vector(theta_i: PyTree, theta_b: PyTree) -> PyTree:
  """theta_i - theta_b."""
  return jax.tree.map(jnp.subtract, theta_i, theta_b)


def task_arithmetic(theta_b: PyTree, thetas: Sequence[PyTree], lam: float = 1.0) -> PyTree:
  """theta_b + lam * sum_i (theta_i - theta_b)."""
  return _task_arithmetic(theta_b, tuple(thetas), float(lam))


def weight_average(thetas: Sequence[PyTree], weights: Sequence[float] | None = None) -> PyTree:
  """sum_i w_i theta_i with weights summing to one (uniform by default)."""
  weights = [1.0 / len(thetas)] * len(thetas) if weights is None else list(weights)
  total = sum(weights)
  # the normalised weights as Python floats (static), as they were before the merges were jitted
  return _weighted_sum(tuple(thetas), tuple(float(w / total) for w in weights))


# Jitted (one program per tree shape, and per lam / weights) rather than op by op, where every
# primitive of every leaf shape compiles on its own; the same float32 operations in the same order
@functools.partial(jax.jit, static_argnums=2)
def _task_arithmetic(theta_b: PyTree, thetas: tuple, lam: float) -> PyTree:
  def combine(b, *experts):
    return b + lam * sum(e - b for e in experts)
  return jax.tree.map(combine, theta_b, *thetas)


@functools.partial(jax.jit, static_argnums=1)
def _weighted_sum(thetas: tuple, weights: tuple) -> PyTree:
  return jax.tree.map(lambda *ts: sum(w * t for w, t in zip(weights, ts, strict=True)), *thetas)
