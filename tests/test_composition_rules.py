"""The step spec (composition/rules.py) on fixed logits against independent float64 numpy
closed forms: CFG, DExperts, contrastive decoding, the masks, selective gating, the EOS rules;
and that every option changes the output on a case built for it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax.composition import rules
from compgen_jax.composition.spec import Spec

jax.config.update("jax_numpy_rank_promotion", "raise")

V, EOS = 12, 1


def _logits(seed, shape=(6, V), scale=3.0):
  return np.random.default_rng(seed).normal(size=shape) * scale


def _log_softmax(z):
  z = np.asarray(z, np.float64)
  m = z.max(-1, keepdims=True)
  return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def _softmax(z):
  return np.exp(_log_softmax(z))


def _hf_nucleus(z, p):
  """Hugging Face's top-p filter (as DExperts' filter_p uses it): sort descending, drop tokens
  whose cumulative probability exceeds p, always keeping the first. Boolean [.., V]."""
  keep = np.zeros(z.shape, bool)
  for r in range(z.shape[0]):
    order = np.argsort(-z[r], kind="stable")
    cum = np.cumsum(_softmax(z[r][order]))
    drop = cum > p
    drop[1:], drop[0] = drop[:-1].copy(), False
    keep[r, order[~drop]] = True
  return keep


def _step(logits_list, lam=None, **spec):
  logp = jnp.stack([jax.nn.log_softmax(jnp.asarray(z, jnp.float32)) for z in logits_list])
  lam = None if lam is None else jnp.asarray(lam, jnp.float32)
  out, log_z = rules.step(logp, lam, Spec(**spec), EOS)
  return np.exp(np.asarray(out, np.float64)), np.asarray(log_z)


def test_cfg_is_the_paper_operator_with_weight_one_minus_gamma():
  """u + g (c - u) (Sanchez et al.): background c, one expert u at weight 1 - g."""
  zc, zu = _logits(0), _logits(1)
  for g in (1.5, 3.0):
    got, _ = _step([zc, zu], [1 - g])
    np.testing.assert_allclose(got, _softmax(zu + g * (zc - zu)), atol=1e-5)
  assert not np.allclose(_step([zc, zu], [-0.5])[0], _softmax(zc), atol=1e-2)  # it guides


def test_dexperts_is_the_nucleus_masked_background_plus_alpha_expert_minus_anti():
  """DExperts: softmax(filter_p(z_b) + alpha (z_e - z_a)) on raw logits."""
  zb, ze, za = _logits(2), _logits(3), _logits(4)
  for alpha, p in ((2.0, 0.9), (0.5, 0.6)):
    keep = _hf_nucleus(zb, p)
    want = _softmax(np.where(keep, zb, -np.inf) + alpha * (ze - za))
    got, _ = _step([zb, ze, za], [alpha, -alpha], mask="top_p", mask_p=p)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert np.all(got[~keep] == 0) and np.any(~keep)  # the mask removed tokens


def test_contrastive_decoding_is_the_alpha_masked_expert_minus_beta_amateur():
  """O'Brien & Lewis: (1 + beta) log p_e - beta log p_a over p_e >= alpha max p_e."""
  ze, za = _logits(5), _logits(6)
  lpe, lpa = _log_softmax(ze), _log_softmax(za)
  for beta, alpha in ((0.5, 0.1), (1.0, 0.3)):
    keep = np.exp(lpe) >= alpha * np.exp(lpe).max(-1, keepdims=True)
    want = _softmax(np.where(keep, (1 + beta) * lpe - beta * lpa, -np.inf))
    got, _ = _step([ze, za], [-beta], mask="alpha", mask_alpha=alpha)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert np.any(~keep)


@pytest.mark.parametrize("p", [0.3, 0.7, 0.95])
def test_top_p_mask_never_admits_a_token_outside_the_background_nucleus(p):
  zb = _logits(7, (64, V))
  experts = [_logits(8, (64, V), 6.0), _logits(9, (64, V), 6.0)]
  got, _ = _step([zb] + experts, mask="top_p", mask_p=p)
  outside = ~_hf_nucleus(zb, p)
  assert np.all(got[outside] == 0)
  plain, _ = _step([zb] + experts)
  # the unmasked composition's choice lies outside the nucleus on some rows; masked never
  assert np.any(outside[np.arange(64), plain.argmax(-1)])
  assert not np.any(outside[np.arange(64), got.argmax(-1)])


def test_tail_pick_is_removed_by_the_mask():
  """GAMMA -> GRBBR: a token the background puts in its tail, lifted a little by both experts,
  wins the composition; no component ranks it first. The mask keeps the right token."""
  lb = np.log(np.array([0.90, 0.05, 0.05 - 4e-5, 4e-5]))  # token 3: the background's tail
  l1 = np.log(np.array([0.50, 0.01, 0.01, 0.48]))          # the active expert's second choice
  l2 = np.log(np.array([0.60, 0.05, 0.05, 0.30]))          # the inactive expert, off-tail
  logp = jnp.asarray(np.stack([lb, l1, l2]), jnp.float32)
  plain, _ = rules.step(logp, jnp.ones(2), Spec(), eos_id=1)
  masked, _ = rules.step(logp, jnp.ones(2), Spec(mask="top_p", mask_p=0.9), eos_id=1)
  assert int(jnp.argmax(plain)) == 3 and int(jnp.argmax(masked)) == 0


def _kl64(lp, lq):
  return (np.exp(lp) * (lp - lq)).sum(-1)


def test_gating_tau_zero_is_the_paper_operator_and_kl_gating_drops_inactive_experts():
  zs = [_logits(10), _logits(11), 0.05 * _logits(12) + _logits(10)]  # expert 2 near b
  plain = _step(zs, [1.0, 0.7])
  np.testing.assert_array_equal(_step(zs, [1.0, 0.7], gate="kl", gate_tau=0.0)[0], plain[0])
  lp = [_log_softmax(z) for z in zs]
  kl_K = np.stack([_kl64(lp[1], lp[0]), _kl64(lp[2], lp[0])])  # [K, rows]
  tau = float(np.median(kl_K))
  on = kl_K > tau
  assert on.any() and (~on).any()
  want = _softmax(lp[0] + sum(w * on[i][:, None] * (lp[i + 1] - lp[0])
                              for i, w in enumerate((1.0, 0.7))))
  got, log_z = _step(zs, [1.0, 0.7], gate="kl", gate_tau=tau)
  np.testing.assert_allclose(got, want, atol=1e-5)
  # a tau above every KL leaves the background; its log Z_t is then 0
  bg, log_z_bg = _step(zs, [1.0, 0.7], gate="kl", gate_tau=1e6)
  np.testing.assert_allclose(bg, _softmax(zs[0]), atol=1e-6)
  np.testing.assert_allclose(log_z_bg, 0.0, atol=1e-5)
  assert not np.allclose(got, plain[0], atol=1e-3)


def test_top1_gating_applies_only_the_expert_of_largest_kl():
  zs = [_logits(13), _logits(14), _logits(15), _logits(16)]
  lp = [_log_softmax(z) for z in zs]
  kl_K = np.stack([_kl64(lp[i], lp[0]) for i in (1, 2, 3)])
  top = kl_K.argmax(0)
  assert len(set(top.tolist())) > 1  # different experts win on different rows
  want = _softmax(lp[0] + np.stack([lp[top[r] + 1][r] - lp[0][r] for r in range(len(top))]))
  got, _ = _step(zs, [1.0, 1.0, 1.0], gate="top1", gate_tau=0.0)
  np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("rule", ["background", "min", "vote"])
def test_eos_rules_set_p_eos_and_rescale_the_rest(rule):
  zs = [_logits(17), _logits(18), _logits(19)]
  zs[1][:3, EOS] += 20.0  # the experts rank EOS first on rows 0-2, the background on row 0 too
  zs[2][:3, EOS] += 20.0
  zs[0][0, EOS] += 20.0
  zs[0][1:3, EOS] -= 10.0
  lp = [_log_softmax(z) for z in zs]
  plain = _softmax(lp[0] + (lp[1] - lp[0]) + (lp[2] - lp[0]))
  if rule == "background":
    q = np.exp(lp[0][:, EOS])
  elif rule == "min":
    q = np.exp(np.min([x[:, EOS] for x in lp], axis=0))
  else:
    votes = sum((x.argmax(-1) == EOS).astype(int) for x in lp)
    q = (votes * 2 > 3).astype(np.float64)
  rest = np.delete(plain, EOS, axis=1)
  want = np.insert(rest / rest.sum(-1, keepdims=True) * (1 - q)[:, None], EOS, q, axis=1)
  got, _ = _step(zs, eos=rule)
  np.testing.assert_allclose(got, want, atol=1e-5)
  np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)
  # the composition picks EOS on rows 1-2 (both experts); background and min rules do not
  assert np.all(plain[1:3].argmax(-1) == EOS)
  if rule != "vote":
    assert np.all(got[1:3].argmax(-1) != EOS)


@pytest.mark.parametrize("rule", ["background", "min", "vote"])
def test_eos_rules_ignore_expert_slots_padded_at_weight_zero(rule):
  """k of k_max experts (letters' k_experts) pads the unused slots with the background at
  weight 0: the vote and the minimum must equal the unpadded composition's. Rows 0-2: the
  background ranks EOS first and both experts do not, so 3 background copies would outvote."""
  zs = [_logits(20), _logits(21), _logits(22)]
  zs[0][:3, EOS] += 20.0
  zs[1][:3, EOS] -= 10.0
  zs[2][:3, EOS] -= 10.0
  want, _ = _step(zs, [1.0, 1.0], eos=rule)
  padded, _ = _step(zs + [zs[0], zs[0]], [1.0, 1.0, 0.0, 0.0], eos=rule)
  np.testing.assert_allclose(padded, want, atol=1e-6)
  if rule == "vote":  # the case tells the rule apart: the background alone is outvoted
    lp = [_log_softmax(z) for z in zs]
    assert np.all(want[:3, EOS] == 0.0) and np.all(lp[0][:3].argmax(-1) == EOS)
    unweighted = sum((x.argmax(-1) == EOS).astype(int) for x in lp + [lp[0], lp[0]])
    assert np.all(unweighted[:3] * 2 > 5)  # every copy voting would have ended the string
