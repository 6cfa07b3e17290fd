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


def _np_step_gram(lb, le):
  """float64 reference: G_ij = mean over steps of sum_v p_b delta_i delta_j, and its cosine."""
  lb, le = np.asarray(lb, np.float64), np.asarray(le, np.float64)
  k, steps = le.shape[0], lb.reshape(-1, lb.shape[-1]).shape[0]
  g = np.zeros((k, k))
  for i in range(k):
    for j in range(k):
      di, dj = (le[i] - lb).reshape(steps, -1), (le[j] - lb).reshape(steps, -1)
      g[i, j] = np.mean([np.sum(np.exp(b) * a * c)
                         for b, a, c in zip(lb.reshape(steps, -1), di, dj, strict=True)])
  return g, g / np.sqrt(np.outer(np.diag(g), np.diag(g)))


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
  g, cos = _np_step_gram(lb, overlap)
  np.testing.assert_allclose(d["ortho_KxK"], g, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(d["ortho_cos_KxK"], cos, rtol=1e-4, atol=1e-6)
  assert float(diagnostics.offdiag_max(d["ortho_cos_KxK"])) > 0.1
  # chained 0->1 then 1->2 (the background is 0 where expert 2 reads 1): the experts act on
  # different steps, so step by step the chain is factorized: no overlap, orthogonal.
  lb_chain = _peaked([0, 1, 0, 0])[None]
  chain = jnp.stack([_peaked([1, 1, 0, 0]), _peaked([0, 2, 0, 0])])[:, None]
  d = diagnostics.diagnose(lb_chain, chain, valid)
  assert float(diagnostics.offdiag_max(d["overlap_KxK"])) == 0.0
  np.testing.assert_allclose(d["ortho_KxK"], _np_step_gram(lb_chain, chain)[0], atol=1e-5)
  assert abs(float(d["ortho_cos_KxK"][0, 1])) < 1e-3
  # a mask excludes steps from every statistic.
  d = diagnostics.diagnose(lb, overlap, jnp.array([[True, False, True, True]]))
  assert float(diagnostics.offdiag_max(d["overlap_KxK"])) == 0.0


def test_factorized_experts_sharing_an_output_letter_are_orthogonal():
  # Like A>K with M>K: both raise token 2 on average, but on different steps (inputs 0 and 1).
  # The mean-difference statistic called these parallel (cos ~ 1); step by step they are not.
  lb = _peaked([0, 1, 0, 1, 3, 4])[None]
  experts = jnp.stack([_peaked([2, 1, 2, 1, 3, 4]), _peaked([0, 2, 0, 2, 3, 4])])[:, None]
  d = diagnostics.diagnose(lb, experts, jnp.ones((1, 6), bool))
  g, cos = _np_step_gram(lb, experts)
  np.testing.assert_allclose(d["ortho_KxK"], g, rtol=1e-4, atol=1e-5)
  assert abs(cos[0, 1]) < 1e-4 and float(diagnostics.offdiag_max(d["ortho_cos_KxK"])) < 1e-3
  assert float(d["max_abs_log_z"]) < 1e-5  # factorized: Z_t = 1
  # the old statistic, (mu_1 - mu_b).(mu_2 - mu_b) over mean distributions, for contrast
  mu = lambda lp: np.exp(np.asarray(lp, np.float64)).reshape(-1, 6).mean(0)
  d1, d2 = mu(experts[0]) - mu(lb), mu(experts[1]) - mu(lb)
  assert d1 @ d2 / np.linalg.norm(d1) / np.linalg.norm(d2) > 0.1


def test_no_cosine_for_an_expert_that_barely_differs_from_the_background():
  # k experts padded with background copies: a copy differs only by float noise (here planted
  # along expert 0's direction, so its cosine with expert 0 would be 1).
  lb = _peaked([0, 0, 3, 0])[None]
  e0 = _peaked([1, 0, 3, 0])[None]
  noise = lb + 1e-5 * (e0 - lb)
  d = diagnostics.diagnose(lb, jnp.stack([e0, noise]), jnp.ones((1, 4), bool), norm_floor=1e-3)
  assert np.isnan(d["ortho_cos_KxK"][0, 1]) and np.isnan(d["ortho_cos_KxK"][1, 1])
  np.testing.assert_allclose(d["ortho_cos_KxK"][0, 0], 1.0, rtol=1e-5)
  assert np.isnan(diagnostics.offdiag_max(d["ortho_cos_KxK"]))  # no pair left: undefined
  assert not diagnostics.offdiag_max(d["ortho_cos_KxK"]) > 0.1  # never flagged
  d = diagnostics.diagnose(lb, jnp.stack([e0, noise]), jnp.ones((1, 4), bool), norm_floor=0.0)
  np.testing.assert_allclose(d["ortho_cos_KxK"][0, 1], 1.0, rtol=1e-3)  # without the floor


def _with_zeros(shape, zero_tokens, key):
  logits = jax.random.normal(key, shape)
  return jax.nn.log_softmax(logits.at[..., jnp.asarray(zero_tokens)].set(-jnp.inf), axis=-1)


def test_tokens_of_probability_zero_keep_everything_finite():
  # background rules out token 0; expert 1 rules out 0 and 1; expert 2 rules out 0 and 2.
  kb, k1, k2 = jax.random.split(jax.random.key(7), 3)
  lb = _with_zeros((3, 6), [0], kb)
  le = jnp.stack([_with_zeros((3, 6), [0, 1], k1), _with_zeros((3, 6), [0, 2], k2)])
  assert np.isneginf(np.asarray(lb)[:, 0]).all()
  logp, log_z = compose.compose(lb, le)
  pb, p1, p2 = (np.exp(np.asarray(x, np.float64)) for x in (lb, le[0], le[1]))
  unnorm = np.where(pb > 0, p1 * p2 / np.where(pb > 0, pb, 1.0), 0.0)  # 0 where any p is 0
  np.testing.assert_allclose(np.exp(logp), unnorm / unnorm.sum(-1, keepdims=True), atol=1e-6)
  np.testing.assert_allclose(log_z, np.log(unnorm.sum(-1)), rtol=1e-5)
  with np.errstate(divide="ignore", invalid="ignore"):
    kl_np = [np.sum(np.where(p > 0, p * np.log(p / pb), 0.0), -1) for p in (p1, p2)]
  d = diagnostics.diagnose(lb[None], le[:, None], jnp.ones((1, 3), bool))
  np.testing.assert_allclose(d["kl_KxBxT"][:, 0], np.stack(kl_np), rtol=1e-5)
  for k, v in d.items():
    assert np.all(np.isfinite(np.asarray(v, np.float64))), k


def test_background_zero_is_clamped_like_the_reference():
  # The authors' operator: log p_1 + log p_2 - clamp(log p_b, -1e4). A token the background
  # rules out but both experts allow gets a boost of 1e4 and wins.
  kb, k1, k2 = jax.random.split(jax.random.key(8), 3)
  lb = _with_zeros((2, 5), [3], kb)
  l1, l2 = _logp(k1, (2, 5)), _logp(k2, (2, 5))
  logp, log_z = compose.compose(lb, jnp.stack([l1, l2]))
  ref = (np.asarray(l1, np.float64) + np.asarray(l2, np.float64)
         - np.maximum(np.asarray(lb, np.float64), -1e4))
  np.testing.assert_allclose(logp, ref - np.log(np.exp(ref - ref.max(-1, keepdims=True)).sum(
      -1, keepdims=True)) - ref.max(-1, keepdims=True), atol=1e-3)
  assert np.all(np.argmax(np.asarray(logp), -1) == 3) and np.all(np.isfinite(log_z))
  # weight 0 on an expert that rules a token out: it takes no part (no 0 * -inf)
  logp0, _ = compose.compose(l2, jnp.stack([lb, l1]), jnp.asarray([0.0, 1.0]))
  chex.assert_trees_all_close(logp0, l1, atol=1e-5)
