"""The composition operator, task arithmetic and the diagnostics, on hand-made distributions."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax.composition import arithmetic, compose, diagnostics

jax.config.update("jax_numpy_rank_promotion", "raise")


def _logp(key, shape):
  return jax.nn.log_softmax(jax.random.normal(key, shape) * 2.0, axis=-1)


@pytest.mark.parametrize("lam", [(1.0, 1.0), (0.5, 2.0)])
def test_operator_equals_product_formula(lam):
  kb, k1, k2 = jax.random.split(jax.random.key(0), 3)
  lb, l1, l2 = _logp(kb, (4, 5)), _logp(k1, (4, 5)), _logp(k2, (4, 5))
  logp, log_z = compose.compose(lb, jnp.stack([l1, l2]), jnp.asarray(lam))
  pb, p1, p2 = (np.exp(np.asarray(x, np.float64)) for x in (lb, l1, l2))
  unnorm = pb * (p1 / pb) ** lam[0] * (p2 / pb) ** lam[1]
  np.testing.assert_allclose(np.exp(logp), unnorm / unnorm.sum(-1, keepdims=True), rtol=1e-5)
  np.testing.assert_allclose(log_z, np.log(unnorm.sum(-1)), rtol=1e-5, atol=1e-6)


def test_temperature_and_logits_entry_point():
  kb, k1 = jax.random.split(jax.random.key(1))
  zb, z1 = jax.random.normal(kb, (3, 6)), jax.random.normal(k1, (3, 6))
  logp, _ = compose.compose_logits(zb, z1[None], temperature=0.5)
  unnorm = jax.nn.log_softmax(z1)  # one expert, lambda 1: the expert itself
  chex.assert_trees_all_close(logp, jax.nn.log_softmax(unnorm / 0.5), atol=1e-5)


def test_expert_equal_to_background_returns_other_expert():
  kb, k1 = jax.random.split(jax.random.key(2))
  lb, l1 = _logp(kb, (2, 3, 7)), _logp(k1, (2, 3, 7))
  logp, log_z = compose.compose(lb, jnp.stack([lb, l1]))
  chex.assert_trees_all_close(logp, l1, atol=1e-6)
  chex.assert_trees_all_close(log_z, jnp.zeros_like(log_z), atol=1e-6)
  logp0, log_z0 = compose.compose(lb, jnp.zeros((0,) + lb.shape))  # no experts: background
  chex.assert_trees_all_close((logp0, log_z0), (lb, jnp.zeros_like(log_z0)), atol=1e-6)


def test_task_arithmetic_with_linear_logits_equals_logit_composition():
  keys = jax.random.split(jax.random.key(3), 4)
  feats = jax.random.normal(keys[0], (10, 8))
  init = lambda k: {"w": jax.random.normal(k, (8, 5)), "b": jax.random.normal(k, (5,))}
  theta_b, theta_1, theta_2 = (init(k) for k in keys[1:])
  logits = lambda t: feats @ t["w"] + t["b"][None]
  for lam in (1.0, 0.7):
    ta = arithmetic.task_arithmetic(theta_b, [theta_1, theta_2], lam)
    composed, _ = compose.compose_logits(logits(theta_b),
                                         jnp.stack([logits(theta_1), logits(theta_2)]),
                                         jnp.asarray([lam, lam]))
    chex.assert_trees_all_close(composed, jax.nn.log_softmax(logits(ta)), atol=1e-4)


def test_arithmetic_helpers():
  a, b, c = ({"x": jnp.array(v)} for v in ([1.0, 2.0], [3.0, 2.0], [1.0, 5.0]))
  chex.assert_trees_all_close(arithmetic.task_arithmetic(a, [b, c], 0.5),
                              {"x": jnp.array([2.0, 3.5])})
  chex.assert_trees_all_close(arithmetic.weight_average([a, b, c]),
                              {"x": jnp.array([5 / 3, 3.0])})
  chex.assert_trees_all_close(arithmetic.task_vector(b, a), {"x": jnp.array([2.0, 0.0])})


def _peaked(index_T, vocab=6, sharp=8.0):
  return jax.nn.log_softmax(sharp * jax.nn.one_hot(jnp.asarray(index_T), vocab), axis=-1)


def test_diagnostics_flag_planted_overlap_and_chain():
  # 1 sequence, 4 steps; the background copies token 0; experts move some steps to other tokens.
  # Like A>B and C>D: the experts rewrite different background tokens (0 and 3).
  lb = _peaked([0, 0, 3, 0])[None]
  disjoint = jnp.stack([_peaked([1, 0, 3, 0]), _peaked([0, 0, 2, 0])])[:, None]
  overlap = jnp.stack([_peaked([1, 1, 3, 0]), _peaked([0, 2, 2, 0])])[:, None]
  valid = jnp.ones((1, 4), bool)
  d = diagnostics.diagnose(lb, disjoint, valid)
  assert float(diagnostics.offdiag_max(d["overlap_KxK"])) == 0.0
  assert float(d["max_abs_log_z"]) < 1e-5  # at most one expert differs at every step
  assert float(diagnostics.offdiag_max(d["ortho_cos_KxK"])) < 1e-3
  assert float(d["tv_mask_K"].max()) < 1e-5 and float(d["tv_background"]) < 1e-6
  np.testing.assert_allclose(d["active_frac_K"], [0.25, 0.25])
  d = diagnostics.diagnose(lb, overlap, valid)
  np.testing.assert_allclose(d["overlap_KxK"][0, 1], 0.25)  # step 1 only
  assert float(d["max_abs_log_z"]) > 0.3  # two experts disagree at step 1: Z_t != 1
  assert float(d["tv_mask_K"].max()) > 0.1
  # chained 0->1 then 1->2 (the background is 0 where expert 2 reads 1): negative mean overlap.
  lb_chain = _peaked([0, 1, 0, 0])[None]
  chain = jnp.stack([_peaked([1, 1, 0, 0]), _peaked([0, 2, 0, 0])])[:, None]
  d = diagnostics.diagnose(lb_chain, chain, valid)
  assert float(diagnostics.offdiag_max(d["overlap_KxK"])) == 0.0
  assert float(d["ortho_KxK"][0, 1]) < -0.01
  # a mask excludes steps from every statistic.
  d = diagnostics.diagnose(lb, overlap, jnp.array([[True, False, True, True]]))
  assert float(diagnostics.offdiag_max(d["overlap_KxK"])) == 0.0
