"""AdamW as the paper uses it: decoupled weight decay on matrices only, per-run lr and wd."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from compgen_jax.students import registry as students
from compgen_jax.training import optim as state_lib
from tests.helpers import load_config


def _zero_grad_update(params, lr: float, wd: float, cfg):
  opt = state_lib.optimizer(cfg.optim)
  opt_state = opt.init(params)
  opt_state.hyperparams["learning_rate"] = jnp.asarray(lr)
  opt_state.hyperparams["weight_decay"] = jnp.asarray(wd)
  zeros = jax.tree.map(jnp.zeros_like, params)
  updates, _ = opt.update(zeros, opt_state, params)
  return optax.apply_updates(params, updates)


@pytest.mark.parametrize("student", ["mlp", "transformer", "hypernetwork"])
def test_zero_gradient_step_decays_matrices_only(student):
  """With a zero gradient, Adam's update is 0, so AdamW gives p - lr * wd * p for every kernel
  (ndim > 1) and leaves biases and LayerNorm scales (ndim <= 1) untouched."""
  cfg = load_config("hyperteacher", "tiny", **{"student.name": student})
  params = students.init_params(cfg.student, jax.random.key(0), 6, 4, 2, 0)
  lr, wd = 0.1, 0.3
  new = _zero_grad_update(params, lr, wd, cfg)
  num_matrices = 0
  for old_leaf, new_leaf in zip(jax.tree.leaves(params), jax.tree.leaves(new), strict=True):
    old_leaf, new_leaf = np.asarray(old_leaf, np.float64), np.asarray(new_leaf, np.float64)
    if old_leaf.ndim > 1:
      num_matrices += 1
      np.testing.assert_allclose(new_leaf, (1 - lr * wd) * old_leaf, rtol=1e-5, atol=1e-7)
    else:
      np.testing.assert_array_equal(new_leaf, old_leaf)
  assert num_matrices >= 1


def test_weight_decay_value_is_live():
  """Two weight decays give two different parameter vectors after the same zero-grad step."""
  cfg = load_config("hyperteacher", "tiny")
  params = students.init_params(cfg.student, jax.random.key(0), 6, 4, 2, 0)
  a = _zero_grad_update(params, 0.1, 0.0, cfg)
  b = _zero_grad_update(params, 0.1, 0.5, cfg)
  kernels = [(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
             if x.ndim > 1]
  assert all(not np.allclose(x, y) for x, y in kernels)


def test_weight_decay_sweep_changes_the_runs():
  """Through the real training step: runs that differ only in weight decay end apart, and the
  decayed run has the smaller kernel norm."""
  from compgen_jax.scaling import runs
  from compgen_jax.scaling import train as scaling_train

  cfg = load_config("hyperteacher", "tiny", **{"num_seeds": 1, "sweep.weight_decay": (0.0, 3.0)})
  grid = runs.precompute_splits(cfg, runs.run_grid(cfg))
  state = scaling_train.make_init(cfg)(*runs.run_inputs(cfg, grid))
  state, _, _ = scaling_train.make_chunk(cfg, 50)(state, scaling_train.task_bits(cfg))
  kernels = [np.asarray(p) for p in jax.tree.leaves(state.params) if p.ndim > 2]
  norms = [sum(float(np.sum(k[r] ** 2)) for k in kernels) for r in range(2)]
  assert norms[1] < 0.9 * norms[0], norms
