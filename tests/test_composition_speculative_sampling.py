"""Speculative composed sampling (the background drafts, the composition accepts or resamples):
its samples are distributed as plain composed sampling's, checked against the exact
distribution in float64; the same check rejects the two classic wrong rules; a draft equal to
the target is always accepted."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from compgen_jax.composition import generate as gen_lib
from compgen_jax.composition import speculative
from compgen_jax.composition.spec import Truncation
from compgen_jax.lm import gemma2
from compgen_jax.lm.model import forward
from tests import helpers

jax.config.update("jax_numpy_rank_promotion", "raise")

ALPHA = 1e-4  # a chi-square p-value below this fails the frequency check
ACCEPT = speculative.accept_sampled  # the rule under test (the wrong ones below wrap it)


def _p_value(samples: list, probs: dict) -> float:
  """Pearson's chi-square p-value of the samples' cells against exact probabilities (cells
  expected fewer than 5 times pooled into one); 0 if a cell of probability 0 occurs."""
  cells = list(probs)
  index = {c: i for i, c in enumerate(cells)}
  count = np.bincount([index[s] for s in samples], minlength=len(cells))
  expected = np.array([probs[c] for c in cells]) * len(samples)
  small = expected < 5
  obs, exp = count[~small], expected[~small]
  if expected[small].sum() > 0:
    obs, exp = np.append(obs, count[small].sum()), np.append(exp, expected[small].sum())
  elif count[small].sum():
    return 0.0
  return float(stats.chi2.sf(((obs - exp) ** 2 / exp).sum(), len(obs) - 1))


def _always_accept(key_B, drafts_Bxn, draft_logits_BxnxV, target_logits_Bxn1xV):
  """Wrong: every draft accepted (the target set to the draft's distribution)."""
  as_draft = jnp.concatenate([draft_logits_BxnxV, target_logits_Bxn1xV[:, -1:]], axis=1)
  return ACCEPT(key_B, drafts_Bxn, draft_logits_BxnxV, as_draft)


def _resample_from_target(key_B, drafts_Bxn, draft_logits_BxnxV, target_logits_Bxn1xV):
  """Wrong: after a rejection the token is drawn from p, not from the residual."""
  accepted_B, choice_Bxn1 = ACCEPT(key_B, drafts_Bxn, draft_logits_BxnxV, target_logits_Bxn1xV)
  keys_B = jax.vmap(jax.random.fold_in, in_axes=(0, None))(key_B, 99)
  new_Bxn1 = jax.vmap(jax.random.categorical)(keys_B, target_logits_Bxn1xV)
  at_Bxn1 = jnp.arange(choice_Bxn1.shape[1])[None] == accepted_B[:, None]
  return accepted_B, jnp.where(at_Bxn1, new_Bxn1, choice_Bxn1)


WRONG = {"always_accept": _always_accept, "resample_from_target": _resample_from_target}


def _kernel_case(num: int = 20_000, vocab: int = 5, n: int = 2):
  """Fixed target p_j [n1, V] and draft q_j [n, V] (a token q rules out that p allows, and one
  p rules out that q allows), drafts drawn from q, and the kernel's inputs [B, ...]."""
  rng = np.random.default_rng(0)
  p, q = rng.dirichlet(np.ones(vocab), size=n + 1), rng.dirichlet(np.ones(vocab), size=n)
  q[0, 0], p[0, 1] = 0.0, 0.0
  p, q = p / p.sum(-1, keepdims=True), q / q.sum(-1, keepdims=True)
  log = lambda x: jnp.broadcast_to(jnp.log(jnp.asarray(x, jnp.float32)), (num,) + x.shape)
  key_drafts, key_kernel = jax.random.split(jax.random.key(1))
  drafts = jax.random.categorical(key_drafts, log(q)).astype(jnp.int32)
  keys = jax.random.split(key_kernel, num)
  return p, q, (keys, drafts, log(q), log(p))


def test_the_kernel_emits_the_target_distribution_at_every_position():
  """Token j of a round (emitted when the j drafts before it were accepted) is distributed as
  p_j, and draft j is accepted with probability sum_v min(p_j, q_j) (float64, exact)."""
  p, q, args = _kernel_case()
  accepted, choice = map(np.asarray, jax.jit(ACCEPT)(*args))
  for j in range(p.shape[0]):
    reached = accepted >= j
    assert _p_value(choice[reached, j].tolist(), dict(enumerate(p[j]))) > ALPHA, j
    if j < q.shape[0]:
      rate, count = np.minimum(p[j], q[j]).sum(), reached.sum()
      sd = np.sqrt(rate * (1 - rate) / count)
      assert abs((accepted[reached] > j).mean() - rate) < 5 * sd, j
  assert np.all(choice[accepted >= 1, 0] != 0)  # q rules token 0 out: never a draft
  assert np.all(choice[:, 0][accepted == 0] != 1)  # p rules token 1 out: never resampled


@pytest.mark.parametrize("wrong", list(WRONG))
def test_the_frequency_check_rejects_a_wrong_rule(wrong):
  p, _, args = _kernel_case()
  accepted, choice = map(np.asarray, jax.jit(WRONG[wrong])(*args))
  assert _p_value(choice[:, 0].tolist(), dict(enumerate(p[0]))) < ALPHA


V, NEW, TEMPERATURE, LAM = 6, 3, 0.8, (1.0, 0.5)
CFG = helpers.TINY_GEMMA._replace(vocab_size=V)
MODEL = gemma2.make_model(CFG)
TRUNC = Truncation(top_k=4)
PROMPT = np.array([[2, 4, 5, 3]], np.int32)


@pytest.fixture(scope="module")
def params():
  keys = jax.random.split(jax.random.key(0), 3)
  return tuple(jax.tree.map(lambda x: 3.0 * x, gemma2.init_params(CFG, k)) for k in keys)


def _exact(params) -> dict:
  """The probability of every sequence plain composed sampling can emit (cut after EOS), from
  teacher-forced logits composed in float64: log p_b + sum_i lam_i (log p_i - log p_b), at the
  temperature, top-k."""
  seqs = np.array(list(itertools.product(range(V), repeat=NEW)), np.int32)
  inputs = np.concatenate([np.repeat(PROMPT, len(seqs), 0), seqs[:, :-1]], axis=1)
  logits = jax.jit(forward, static_argnums=0)
  logp = [np.asarray(jax.nn.log_softmax(logits(MODEL, p, jnp.asarray(inputs))), np.float64)
          [:, -NEW:] for p in params]
  u = (logp[0] + sum(lam * (e - logp[0]) for lam, e in zip(LAM, logp[1:], strict=True))) \
      / TEMPERATURE
  u = np.where(u >= np.sort(u, axis=-1)[..., -TRUNC.top_k:-TRUNC.top_k + 1], u, -np.inf)
  logp_seq = np.take_along_axis(u - np.logaddexp.reduce(u, axis=-1, keepdims=True),
                                seqs[..., None], axis=-1)[..., 0]
  probs = {}
  for s, lp in zip(seqs, logp_seq, strict=True):
    end = next((i + 1 for i, t in enumerate(s) if t == CFG.eos_id), NEW)
    probs[tuple(s[:end].tolist())] = float(np.exp(lp[:end].sum()))
  return probs


def _draws(fn, num=4000):
  prompts = np.repeat(PROMPT, num, 0)
  gen = fn(prompts, np.ones(prompts.shape, bool), np.full(num, NEW), lam_K=np.asarray(LAM),
           greedy=False, temperature=TEMPERATURE, trunc=TRUNC, key=jax.random.key(7))
  out = gen.gen if isinstance(gen, speculative.Speculated) else gen
  toks, lens = np.asarray(out.tokens_BxN), np.asarray(out.lengths_B)
  return [tuple(toks[b, :lens[b]].tolist()) for b in range(num)], gen


def _speculate(params):
  return lambda *args, **kw: speculative.generate_speculative((MODEL,) * 3, params, *args,
                                                              draft_len=2, **kw)


@pytest.mark.parametrize("rule", ["speculative", "plain"])
def test_sequences_are_distributed_as_plain_composed_sampling(params, rule):
  """Whole sequences of 3 tokens (EOS ends one; 2 drafts a round, so rounds of 1 to 3 tokens
  and a second round) against their exact probabilities, for speculative and plain composed
  sampling. (Patched into the decoder, the wrong rules above fail this check by far: p-values
0 and 7e-77 when measured.)"""
  if rule == "plain":
    run = lambda *args, **kw: gen_lib.generate((MODEL,) * 3, params, *args, **kw)
  else:
    run = _speculate(params)
  samples, out = _draws(run)
  exact = _exact(params)
  assert abs(sum(exact.values()) - 1) < 1e-9 and min(len(s) for s in samples) < NEW  # EOS
  assert _p_value(samples, exact) > ALPHA
  if rule == "speculative":  # drafts both accepted and rejected
    assert 0.1 < float(out.acceptance) < 0.9 and int(out.num_rounds) > 1


def test_a_draft_equal_to_the_target_is_always_accepted(params):
  """Experts equal to the background: every draft accepted (the emitted ones: a row may end
  at EOS), so one round emits all 3 tokens."""
  b = params[0]
  _, out = _draws(_speculate((b, b, b)))  # the program of the test above, other params
  lengths = np.asarray(out.gen.lengths_B)
  np.testing.assert_array_equal(out.accepted_B, np.minimum(out.drafted_B, lengths))
  assert int(out.num_rounds) == 1 and np.all(out.drafted_B == 2) and np.any(lengths == NEW)
