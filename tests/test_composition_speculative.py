"""Speculative composed greedy decoding with the background as the draft: the same tokens as
plain composed greedy decoding, token for token; drafts accepted where experts agree."""

import jax
import numpy as np
import pytest

from compgen_jax.composition import generate as gen_lib
from compgen_jax.composition import speculative
from compgen_jax.composition.spec import Spec
from compgen_jax.lm import gemma2

jax.config.update("jax_numpy_rank_promotion", "raise")

CFG = gemma2.Gemma2Config(
    vocab_size=32, width=16, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=8, mlp_dim=32,
    rms_eps=1e-6, rope_base=10_000.0, query_pre_attn_scalar=8.0, attn_softcap=50.0,
    final_softcap=30.0, sliding_window=4, sliding_layers=(True, False), bos_id=2, eos_id=1,
    pad_id=0)
MODEL = gemma2.make_model(CFG)
N = 12


@pytest.fixture(scope="module")
def params():
  return tuple(jax.tree.map(lambda x: 3.0 * x, gemma2.init_params(CFG, k))
               for k in jax.random.split(jax.random.key(0), 3))


def _prompts(lens=(6, 3, 5, 4)):
  p = max(lens)
  toks = np.array(jax.random.randint(jax.random.key(1), (len(lens), p), 3, CFG.vocab_size))
  valid = np.arange(p)[None] >= p - np.asarray(lens)[:, None]
  toks[np.arange(len(lens)), np.argmax(valid, axis=1)] = CFG.bos_id
  return np.where(valid, toks, CFG.pad_id).astype(np.int32), valid


@pytest.mark.parametrize("draft_len,spec", [
    (1, Spec()), (3, Spec(operator="authors", mask="top_p", mask_p=0.8, eos="min"))])
def test_speculative_equals_plain_greedy_token_for_token(params, draft_len, spec):
  prompts, valid = _prompts()
  plain_eos = gen_lib.generate((MODEL,), params[:1], prompts, valid, np.full(4, N))
  # an EOS that plain decoding emits mid-sequence in some row, so rows end at different steps
  eos_id = int(np.asarray(plain_eos.tokens_BxN)[1, 4])
  model = MODEL._replace(eos_id=eos_id)
  budgets = np.array([N, 9, 0, 11])
  kw = dict(spec=spec, max_new_tokens=N, prefill_chunk=4)
  plain = gen_lib.generate((model,) * 3, params, prompts, valid, budgets, **kw)
  fast = speculative.generate_speculative((model,) * 3, params, prompts, valid, budgets,
                                          draft_len=draft_len, **kw)
  np.testing.assert_array_equal(fast.tokens_BxN, plain.tokens_BxN)
  np.testing.assert_array_equal(fast.lengths_B, plain.lengths_B)
  np.testing.assert_array_equal(fast.reason_B, plain.reason_B)
  assert int(np.sum(plain.lengths_B)) > 2 * N  # long enough to cross several rounds
  assert int(fast.num_rounds) <= int(plain.num_steps)


def test_drafts_are_accepted_where_experts_equal_the_background(params):
  prompts, valid = _prompts()
  b = params[0]
  same = speculative.generate_speculative((MODEL,) * 3, (b, b, b), prompts, valid,
                                          np.full(4, N), draft_len=3, stop_at_eos=False)
  plain = gen_lib.generate((MODEL,), (b,), prompts, valid, np.full(4, N), stop_at_eos=False)
  np.testing.assert_array_equal(same.tokens_BxN, plain.tokens_BxN)
  np.testing.assert_array_equal(same.accepted_B, same.drafted_B)  # every draft accepted
  assert int(same.num_rounds) == N // 4  # n + 1 = 4 tokens per round
  other = speculative.generate_speculative((MODEL,) * 3, params, prompts, valid, np.full(4, N),
                                           draft_len=3, stop_at_eos=False)
  assert np.all(other.accepted_B < other.drafted_B)  # different experts reject drafts
  assert int(other.num_rounds) > N // 4
