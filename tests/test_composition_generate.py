"""Composed generation with tiny random Gemma-2 models: cache vs full forward, left padding,
the operator's identities, budgets, stop sequences, sampling, -inf logits, diagnostics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax.composition import compose, decode, diagnostics
from compgen_jax.composition import generate as gen_lib
from compgen_jax.composition.spec import Spec
from compgen_jax.lm import gemma2
from compgen_jax.lm.model import forward
from tests import helpers

jax.config.update("jax_numpy_rank_promotion", "raise")

CFG = helpers.TINY_GEMMA
MODEL = gemma2.make_model(CFG)
N = 10


@pytest.fixture(scope="module")
def params():
  return helpers.tiny_gemma_params()


_prompts = helpers.tiny_gemma_prompts


def _gen(models, ps, prompts, valid, budgets=None, **kw):
  budgets = np.full((prompts.shape[0],), N) if budgets is None else budgets
  return gen_lib.generate(models, ps, prompts, valid, budgets, prefill_chunk=4, **kw)


def _reference_greedy(ps, prompts, valid, num_new):
  """Argmax of repeated full forward passes (no cache) over the growing sequence (a fixed
  buffer: positions past the sequence are invalid and, the model being causal, unseen)."""
  batch, p = prompts.shape
  toks = np.concatenate([np.asarray(prompts), np.zeros((batch, num_new), np.int32)], 1)
  val = np.concatenate([np.asarray(valid), np.zeros((batch, num_new), bool)], 1)
  fwd = jax.jit(lambda t, v: forward(MODEL, ps, t, v))
  for n in range(num_new):
    logits = fwd(jnp.asarray(toks), jnp.asarray(val))[:, p - 1 + n]
    toks[:, p + n], val[:, p + n] = np.asarray(jnp.argmax(logits, -1)), True
  return toks[:, p:]


def _upto_length(g):
  toks, lens = np.asarray(g.tokens_BxN), np.asarray(g.lengths_B)
  return [toks[b, :n].tolist() for b, n in enumerate(lens)]


def _expected_end(ref_row, budget, stops=(), eos_id=CFG.eos_id):
  """(length, reason) of a greedy row: EOS, a stop sequence, or the budget, whichever first."""
  for n in range(1, budget + 1):
    if ref_row[n - 1] == eos_id:
      return n, gen_lib.EOS
    if any(n >= len(s) and list(ref_row[n - len(s):n]) == list(s) for s in stops):
      return n, gen_lib.STOP
  return budget, gen_lib.BUDGET


def test_greedy_generate_equals_full_forward_argmax(params):
  prompts, valid = _prompts()
  ref = _reference_greedy(params[0], prompts, valid, N)
  g = _gen((MODEL,), params[:1], prompts, valid)
  for b in range(3):
    n, reason = _expected_end(ref[b], N)
    assert int(g.lengths_B[b]) == n and int(g.reason_B[b]) == reason
    np.testing.assert_array_equal(np.asarray(g.tokens_BxN)[b, :n], ref[b, :n])
  # without EOS stops every token is compared; prefill_chunk=3 is two whole chunks (4 above:
  # a chunk and the rest)
  whole = gen_lib.generate((MODEL,), params[:1], prompts, valid, np.full(3, N),
                           stop_at_eos=False, prefill_chunk=3)
  np.testing.assert_array_equal(whole.tokens_BxN, ref)
  assert np.all(np.asarray(whole.reason_B) == gen_lib.BUDGET) and int(whole.num_steps) == N


def test_left_padding_does_not_change_a_sequence(params):
  prompts, valid = _prompts()
  models = (MODEL,) * 3
  batched = _gen(models, params, prompts, valid)
  more = 3  # every row padded by 3 more tokens
  padded = _gen(models, params, jnp.pad(prompts, ((0, 0), (more, 0))),
                jnp.pad(valid, ((0, 0), (more, 0))))
  keep = np.asarray(valid[1])  # row 1 alone, without any padding
  alone = _gen(models, params, prompts[1:2, keep], valid[1:2, keep])
  assert _upto_length(padded) == _upto_length(batched)
  assert _upto_length(alone) == _upto_length(batched)[1:2]
  for other, rows in ((padded, slice(None)), (alone, slice(1, 2))):
    np.testing.assert_array_equal(other.reason_B, batched.reason_B[rows])
    np.testing.assert_allclose(other.log_z_BxN, batched.log_z_BxN[rows], atol=1e-4)
    np.testing.assert_allclose(other.kl_BxNxK, batched.kl_BxNxK[rows], atol=1e-4)


def test_compose_b_with_b_is_b_and_b_with_e_is_e(params):
  prompts, valid = _prompts()
  pb, pe = params[0], params[1]
  alone_b = _gen((MODEL,), (pb,), prompts, valid)
  alone_e = _gen((MODEL,), (pe,), prompts, valid)
  bb = _gen((MODEL,) * 2, (pb, pb), prompts, valid)
  be = _gen((MODEL,) * 2, (pb, pe), prompts, valid, lam_K=jnp.ones(1))
  assert _upto_length(bb) == _upto_length(alone_b) and _upto_length(be) == _upto_length(alone_e)
  assert _upto_length(alone_b) != _upto_length(alone_e)  # the check has teeth
  np.testing.assert_allclose(bb.log_z_BxN, 0.0, atol=1e-5)
  np.testing.assert_allclose(bb.kl_BxNxK, 0.0, atol=1e-6)
  gen_len = np.arange(N)[None] < np.asarray(bb.lengths_B)[:, None]
  np.testing.assert_allclose(bb.p_eos_BxN, np.asarray(bb.p_eos_BxNxM)[..., 0], atol=1e-6)
  shapes = {"log_z_BxN": (3, N), "p_eos_BxN": (3, N), "p_eos_BxNxM": (3, N, 2),
            "kl_BxNxK": (3, N, 1), "active_BxNxK": (3, N, 1), "num_active_BxN": (3, N)}
  for name, shape in shapes.items():
    assert getattr(bb, name).shape == shape, name
  assert np.all(np.asarray(bb.p_eos_BxN)[gen_len] > 0)
  assert np.all(np.asarray(bb.p_eos_BxN)[~gen_len] == 0)


def test_budgets_and_eos_end_each_sequence(params):
  prompts, valid = _prompts()
  ref = _reference_greedy(params[0], prompts, valid, N)
  eos_id = int(ref[1, 5])  # a token greedy decoding emits: row 1 ends by EOS by step 6
  budgets = np.array([0, 9, 7])
  g = _gen((MODEL._replace(eos_id=eos_id),), params[:1], prompts, valid, budgets,
           max_new_tokens=N)
  toks = np.asarray(g.tokens_BxN)
  ends = [_expected_end(ref[b], budget, eos_id=eos_id) for b, budget in enumerate(budgets)]
  assert ends[0] == (0, gen_lib.BUDGET) and ends[1][1] == gen_lib.EOS
  for b, (n, reason) in enumerate(ends):
    assert int(g.lengths_B[b]) == n and int(g.reason_B[b]) == reason
    np.testing.assert_array_equal(toks[b, :n], ref[b, :n])
    assert np.all(toks[b, n:] == CFG.pad_id)


def test_stop_sequences_end_at_the_first_match(params):
  prompts, valid = _prompts()
  ref = _reference_greedy(params[0], prompts, valid, N)
  stops = ((int(ref[1, 0]), int(ref[1, 1])), (int(ref[2, 3]),))  # a bigram and a single id
  g = _gen((MODEL,), params[:1], prompts, valid, stop_sequences=stops)
  ends = [_expected_end(ref[b], N, stops) for b in range(3)]
  if stops[1][0] != stops[0][0]:  # then row 1 is stopped by the bigram, after 2 tokens
    assert ends[1] == (2, gen_lib.STOP)
  for b, (n, reason) in enumerate(ends):
    assert int(g.lengths_B[b]) == n and int(g.reason_B[b]) == reason, b
    np.testing.assert_array_equal(np.asarray(g.tokens_BxN)[b, :n], ref[b, :n])
  with pytest.raises(ValueError, match="stop sequences"):
    _gen((MODEL,), params[:1], prompts, valid, stop_sequences=((),))


def test_sampling_is_deterministic_given_the_key(params):
  prompts, valid = _prompts()
  kw = dict(greedy=False, temperature=1.5, stop_at_eos=False)
  a, b, c = (_gen((MODEL,) * 3, params, prompts, valid, key=jax.random.key(k), **kw)
             for k in (5, 5, 6))
  np.testing.assert_array_equal(a.tokens_BxN, b.tokens_BxN)
  assert not np.array_equal(a.tokens_BxN, c.tokens_BxN)
  with pytest.raises(ValueError, match="key"):
    _gen((MODEL,), params[:1], prompts, valid, greedy=False)


def _with_minus_inf(token: int):
  """MODEL with logit -inf at `token`: a model that rules a token out."""
  def apply(p, tokens, cache, valid):
    logits, cache = MODEL.apply(p, tokens, cache, valid)
    return logits.at[..., token].set(-jnp.inf), cache
  return MODEL._replace(apply=apply)


@pytest.mark.parametrize("authors,greedy", [(False, False), (True, True)])
def test_minus_inf_logits_give_no_nan(params, authors, greedy):
  prompts, valid = _prompts()
  models = (_with_minus_inf(5), _with_minus_inf(7), _with_minus_inf(9))
  g = _gen(models, params, prompts, valid, greedy=greedy, key=jax.random.key(3),
           spec=Spec(operator="authors" if authors else "paper"))
  for name, x in g._asdict().items():
    assert np.all(np.isfinite(np.asarray(x, np.float64))), name
  if authors:  # only the background is clamped: an expert's zero stays zero
    assert not np.any(np.isin(np.asarray(g.tokens_BxN), [7, 9]))


def test_authors_variant_is_the_reference_operator():
  keys = jax.random.split(jax.random.key(4), 4)
  logp = [jax.nn.log_softmax(3.0 * jax.random.normal(k, (2, 6))) for k in keys]
  lb, le = logp[0].at[:, 2].set(-jnp.inf), jnp.stack(logp[1:])
  for num_experts in (1, 2, 3):
    got, log_z = compose.compose(lb, le[:num_experts], operator="authors")
    ref = np.asarray(le[:num_experts], np.float64).sum(0) - np.maximum(np.asarray(lb), -1e4)
    ref_lse = np.log(np.exp(ref - ref.max(-1, keepdims=True)).sum(-1)) + ref.max(-1)
    np.testing.assert_allclose(got, ref - ref_lse[:, None], rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(log_z, ref_lse, rtol=1e-5)
  # two experts: the paper's operator at lambda 1 (up to the clamp, on finite log-probs)
  paper, _ = compose.compose(logp[0], le[:2])
  authors_2 = compose.compose(logp[0], le[:2], operator="authors")[0]
  np.testing.assert_allclose(paper, authors_2, atol=1e-5)
  with pytest.raises(ValueError, match="all weights 1"):
    compose.compose(lb, le, jnp.ones(3), operator="authors")


def test_diagnostics_match_teacher_forced_diagnose(params):
  prompts, valid = _prompts()
  models = (MODEL,) * 3
  lam = jnp.array([1.0, 0.5])
  first = _gen(models, params, prompts, valid, lam_K=lam)
  # a threshold inside the KL range, so the active sets are neither empty nor everything
  threshold = float(np.median(np.asarray(first.kl_BxNxK)[np.asarray(first.kl_BxNxK) > 0]))
  g = _gen(models, params, prompts, valid, lam_K=lam, kl_threshold=threshold)
  gen_BxN = np.arange(N)[None] < np.asarray(g.lengths_B)[:, None]
  seq = jnp.concatenate([prompts, g.tokens_BxN], 1)
  seq_valid = jnp.concatenate([valid, jnp.asarray(gen_BxN)], 1)
  logp = jax.jit(lambda ps, t, v: decode.teacher_forced_logps(models, ps, t, v))(
      params, seq, seq_valid)
  p = prompts.shape[1]
  logp = logp[:, :, p - 1:p - 1 + N]  # the distribution each generated token was drawn from
  d = jax.jit(diagnostics.diagnose)(logp[0], logp[1:], jnp.asarray(gen_BxN), lam, threshold)
  np.testing.assert_allclose(g.log_z_BxN, d["log_z_BxT"], atol=1e-4)
  kl_ref = np.where(gen_BxN[..., None], np.moveaxis(np.asarray(d["kl_KxBxT"]), 0, -1), 0.0)
  np.testing.assert_allclose(g.kl_BxNxK, kl_ref, atol=1e-4)
  np.testing.assert_array_equal(g.active_BxNxK, np.moveaxis(np.asarray(d["active_KxBxT"]), 0, -1))
  np.testing.assert_array_equal(g.num_active_BxN, np.asarray(d["active_KxBxT"]).sum(0))
  eos_m = np.where(gen_BxN[..., None], np.exp(np.moveaxis(np.asarray(logp), 0, -1)[
      ..., CFG.eos_id, :]), 0.0)
  np.testing.assert_allclose(g.p_eos_BxNxM, eos_m, atol=1e-5)
  s = gen_lib.summarize(g)
  for name in ("overlap_KxK", "active_frac_K", "mean_abs_log_z", "max_abs_log_z"):
    np.testing.assert_allclose(s[name], d[name], atol=1e-4, err_msg=name)
  assert 0 < float(s["active_frac_K"].min()) < 1 and 0 < float(s["overlap_KxK"][0, 1]) < 1
