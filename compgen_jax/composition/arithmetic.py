"""Task arithmetic and weight averaging over parameter pytrees."""

from collections.abc import Sequence

import jax
import jax.numpy as jnp

from compgen_jax.types import PyTree


def task_vector(theta_i: PyTree, theta_b: PyTree) -> PyTree:
  """theta_i - theta_b."""
  return jax.tree.map(jnp.subtract, theta_i, theta_b)


def task_arithmetic(theta_b: PyTree, thetas: Sequence[PyTree], lam: float = 1.0) -> PyTree:
  """theta_b + lam * sum_i (theta_i - theta_b)."""
  def combine(b, *experts):
    return b + lam * sum(e - b for e in experts)
  return jax.tree.map(combine, theta_b, *thetas)


def weight_average(thetas: Sequence[PyTree], weights: Sequence[float] | None = None) -> PyTree:
  """sum_i w_i theta_i with weights summing to one (uniform by default)."""
  weights = [1.0 / len(thetas)] * len(thetas) if weights is None else list(weights)
  total = sum(weights)
  return jax.tree.map(lambda *ts: sum(w / total * t for w, t in zip(weights, ts, strict=True)),
                      *thetas)
