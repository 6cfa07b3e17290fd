"""Sampling in the decode loop (temperature, top-k, top-p, min-p, a key per row) against a
numpy sampler, and per-component prompts (CFG, proxy-tuning's expert template) in composed
generation against a float64 recomputation from full forward passes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax.composition import generate as gen_lib
from compgen_jax.composition import sampling
from compgen_jax.composition.spec import Truncation
from compgen_jax.lm import gemma2
from compgen_jax.lm.model import forward
from tests import helpers

jax.config.update("jax_numpy_rank_promotion", "raise")

CFG = helpers.TINY_GEMMA
MODEL = gemma2.make_model(CFG)
N = 8


@pytest.fixture(scope="module")
def params():
  return helpers.tiny_gemma_params()


def _numpy_distribution(z, temperature, trunc: Truncation):
  """The truncated sampling distribution in float64, written from the definitions."""
  z = np.asarray(z, np.float64) / temperature
  keep = np.ones(z.shape, bool)
  if trunc.top_k:
    keep &= z >= np.sort(z)[-trunc.top_k]
  p = np.where(keep, np.exp(z - z.max()), 0.0)
  p /= p.sum()
  if trunc.top_p < 1:
    order = np.argsort(-p)
    above = np.cumsum(p[order]) - p[order]
    nucleus = np.zeros(z.shape, bool)
    nucleus[order[above < trunc.top_p]] = True
    p = np.where(nucleus, p, 0.0) / p[nucleus].sum()
  if trunc.min_p > 0:
    p = np.where(p >= trunc.min_p * p.max(), p, 0.0)
    p /= p.sum()
  return p


@pytest.mark.parametrize("temperature,trunc", [
    (1.0, Truncation()), (0.7, Truncation(top_k=5)), (1.3, Truncation(top_p=0.8)),
    (1.0, Truncation(min_p=0.1)), (1.5, Truncation(top_k=9, top_p=0.9, min_p=0.05))])
def test_sampled_frequencies_match_a_numpy_sampler(temperature, trunc):
  z = np.random.default_rng(0).normal(size=12) * 1.5
  want = _numpy_distribution(z, temperature, trunc)
  draws = 40_000
  keys = jax.random.split(jax.random.key(1), draws)
  logp = jnp.broadcast_to(jax.nn.log_softmax(jnp.asarray(z, jnp.float32)), (draws, 12))
  got = np.asarray(jax.jit(sampling.pick, static_argnums=(3, 5))(
      logp, keys, jnp.int32(0), False, temperature, trunc))
  counts = np.bincount(got, minlength=12)
  assert np.all(counts[want == 0] == 0)  # nothing outside the truncated support
  if trunc != Truncation():
    assert np.sum(want == 0) > 0  # the filter removed tokens (it does something)
  support = want > 0
  expected = want[support] * draws
  chi2 = float(np.sum((counts[support] - expected) ** 2 / expected))
  # mean df, sd sqrt(2 df): a bound about 6 sd above the mean (p < 1e-6 for a right sampler)
  df = int(support.sum()) - 1
  assert chi2 < df + 6 * np.sqrt(2 * df) + 10, (chi2, df)
  tv = 0.5 * np.abs(counts / draws - want).sum()
  assert tv < 0.02, tv


_prompts = helpers.tiny_gemma_prompts


def test_a_fixed_key_reproduces_a_sampled_batch_row_by_row(params):
  prompts, valid = _prompts()
  kw = dict(greedy=False, temperature=1.2, stop_at_eos=False, prefill_chunk=4,
            trunc=Truncation(top_k=20, top_p=0.95, min_p=0.01))
  models, budget = (MODEL,) * 3, np.full(3, N)
  keys = jax.random.split(jax.random.key(5), 3)
  a = gen_lib.generate(models, params, prompts, valid, budget, key=keys, **kw)
  b = gen_lib.generate(models, params, prompts, valid, budget, key=keys, **kw)
  np.testing.assert_array_equal(a.tokens_BxN, b.tokens_BxN)
  keep = np.asarray(valid[1])  # row 1 alone, without its padding, with its own key
  alone = gen_lib.generate(models, params, prompts[1:2, keep], valid[1:2, keep], budget[:1],
                           key=keys[1:2], **kw)
  np.testing.assert_array_equal(alone.tokens_BxN[0], a.tokens_BxN[1])
  # one key: row r draws from fold_in(key, r)
  one = gen_lib.generate(models, params, prompts, valid, budget, key=jax.random.key(5), **kw)
  np.testing.assert_array_equal(one.tokens_BxN, gen_lib.generate(
      models, params, prompts, valid, budget,
      key=sampling.row_keys(jax.random.key(5), 3), **kw).tokens_BxN)
  other = gen_lib.generate(models, params, prompts, valid, budget,
                           key=jax.random.split(jax.random.key(6), 3), **kw)
  assert not np.array_equal(other.tokens_BxN, a.tokens_BxN)  # the key matters


def _reference(components, combine, num_new):
  """Greedy tokens from full forward passes (no cache) of each (params, prompt), combined in
  float64 by `combine(raw logits per component)`. A fixed buffer: positions past the sequence
  are invalid and, the model being causal, unseen (one compile per prompt length)."""
  fwd = jax.jit(lambda p, t, v: forward(MODEL, p, t, v))
  out = []
  for n in range(num_new):
    z = []
    for p, prompt in components:
      buf = np.zeros((1, len(prompt) + num_new), np.int32)
      buf[0, :len(prompt) + n] = list(prompt) + out
      valid = np.arange(buf.shape[1])[None] < len(prompt) + n
      z.append(np.asarray(fwd(p, jnp.asarray(buf), jnp.asarray(valid))[0, len(prompt) + n - 1],
                          np.float64))
    out.append(int(np.argmax(combine(*z))))
  return out


def _log_softmax(z):
  return z - z.max() - np.log(np.exp(z - z.max()).sum())


def test_cfg_one_model_under_two_prompts(params):
  """u + g (c - u), u the model under BOS alone, c under the prompt: background c, one
  expert (the same params) under the unconditional prompt at weight 1 - g."""
  prompt = [CFG.bos_id, 7, 9, 4, 11]
  g = 2.0
  want = _reference([(params[0], prompt), (params[0], [CFG.bos_id])],
                    lambda zc, zu: _log_softmax(zu) + g * (_log_softmax(zc) - _log_softmax(zu)),
                    N)
  c, u = jnp.asarray([prompt]), jnp.asarray([[CFG.bos_id]])
  got = gen_lib.generate((MODEL,) * 2, (params[0], params[0]), (c, u),
                         (jnp.ones_like(c, bool), jnp.ones_like(u, bool)), [N],
                         lam_K=jnp.asarray([1 - g]), stop_at_eos=False)
  assert np.asarray(got.tokens_BxN)[0].tolist() == want
  plain = _reference([(params[0], prompt)], lambda z: z, N)
  assert want != plain  # guidance changes the output


def test_proxy_tuning_with_the_expert_under_its_own_template(params):
  """z_base + (z_tuned - z_untuned) on raw logits (proxy-tuning), the tuned expert reading
  the prompt inside its chat template."""
  prompt = [CFG.bos_id, 7, 9, 4, 11]
  templated = [CFG.bos_id, 30, 29, 7, 9, 4, 11, 28]  # "<turn> prompt <model>"
  big, tuned, untuned = params
  want = _reference([(big, prompt), (tuned, templated), (untuned, prompt)],
                    lambda zb, ze, za: zb + (ze - za), N)
  ps = [jnp.asarray([x]) for x in (prompt, templated, prompt)]
  got = gen_lib.generate((MODEL,) * 3, params, tuple(ps), tuple(jnp.ones_like(p, bool)
                                                             for p in ps),
                         [N], lam_K=jnp.asarray([1.0, -1.0]), stop_at_eos=False)
  assert np.asarray(got.tokens_BxN)[0].tolist() == want
  untemplated = _reference([(big, prompt), (tuned, prompt), (untuned, prompt)],
                           lambda zb, ze, za: zb + (ze - za), N)
  assert want != untemplated  # the template changes the output
