"""Speculative composed greedy decoding with the background as the draft: the same tokens as
plain composed greedy decoding, token for token; drafts accepted where experts agree; models
whose positions count cache slots refused."""

import jax
import ml_collections
import numpy as np
import pytest

from compgen_jax.composition import generate as gen_lib
from compgen_jax.composition import speculative
from compgen_jax.composition.spec import Spec
from compgen_jax.lm import gemma2, transformer
from compgen_jax.types import ConfigError
from tests import helpers

jax.config.update("jax_numpy_rank_promotion", "raise")

CFG = helpers.TINY_GEMMA
MODEL = gemma2.make_model(CFG)
N = 12


@pytest.fixture(scope="module")
def params():
  return helpers.tiny_gemma_params()


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
  budgets = np.array([N, 9, 0, 11])
  kw = dict(spec=spec, max_new_tokens=N, prefill_chunk=4, kl_threshold=0.05)
  first = gen_lib.generate((MODEL,) * 3, params, prompts, valid, budgets, stop_at_eos=False, **kw)
  # an EOS that composed decoding emits mid-sequence in row 1, so rows end at different steps
  model = MODEL._replace(eos_id=int(np.asarray(first.tokens_BxN)[1, 4]))
  plain = gen_lib.generate((model,) * 3, params, prompts, valid, budgets, **kw)
  # a stop bigram written by a row that runs to its budget and by no row that ends at EOS
  toks, lens = np.asarray(plain.tokens_BxN), np.asarray(plain.lengths_B)
  reasons = np.asarray(plain.reason_B)
  bigrams = lambda r: [tuple(int(t) for t in toks[r, k:k + 2]) for k in range(lens[r] - 1)]
  seen = {b for r in range(4) if reasons[r] == gen_lib.EOS for b in bigrams(r)}
  stops = (next(b for r in range(4) if reasons[r] == gen_lib.BUDGET and lens[r] >= 8
                for b in bigrams(r)[5:] if b not in seen),)
  plain = gen_lib.generate((model,) * 3, params, prompts, valid, budgets, stop_sequences=stops,
                           **kw)
  fast = speculative.generate_speculative((model,) * 3, params, prompts, valid, budgets,
                                          draft_len=draft_len, stop_sequences=stops, **kw)
  for name in ("tokens_BxN", "lengths_B", "reason_B", "active_BxNxK"):
    np.testing.assert_array_equal(getattr(fast.gen, name), getattr(plain, name), err_msg=name)
  for name in ("log_z_BxN", "p_eos_BxN", "p_eos_BxNxM", "kl_BxNxK"):
    np.testing.assert_allclose(getattr(fast.gen, name), getattr(plain, name), atol=1e-4,
                               err_msg=name)
  reasons = set(np.asarray(plain.reason_B).tolist())
  assert {gen_lib.STOP, gen_lib.BUDGET} <= reasons  # rows end in different ways
  # (the EOS rule 'min' moves p(EOS), so row 1 may no longer pick it)
  assert spec.eos != "composed" or gen_lib.EOS in reasons
  assert int(np.max(plain.lengths_B)) > draft_len + 2  # a row spans more than two rounds
  assert int(fast.num_rounds) <= int(plain.num_steps)
  assert 0 < float(np.asarray(plain.active_BxNxK).mean()) < 1  # diagnostics compared non-trivially


def test_drafts_are_accepted_where_experts_equal_the_background(params):
  prompts, valid = _prompts()
  b = params[0]
  same = speculative.generate_speculative((MODEL,) * 3, (b, b, b), prompts, valid,
                                          np.full(4, N), draft_len=3, stop_at_eos=False)
  plain = gen_lib.generate((MODEL,), (b,), prompts, valid, np.full(4, N), stop_at_eos=False)
  np.testing.assert_array_equal(same.gen.tokens_BxN, plain.tokens_BxN)
  np.testing.assert_array_equal(same.accepted_B, same.drafted_B)  # every draft accepted
  assert int(same.num_rounds) == N // 4  # n + 1 = 4 tokens per round
  other = speculative.generate_speculative((MODEL,) * 3, params, prompts, valid, np.full(4, N),
                                           draft_len=3, stop_at_eos=False)
  assert np.all(other.accepted_B < other.drafted_B)  # different experts reject drafts
  assert int(other.num_rounds) > N // 4


def _letter_lm(positions: str):
  cfg = ml_collections.ConfigDict(dict(width=16, num_layers=2, num_heads=2, mlp_ratio=2,
                                       positions=positions, max_len=128, tie_head=False))
  model = transformer.make_lm(cfg, 12, bos_id=2, eos_id=1, pad_id=0)
  keys = jax.random.split(jax.random.key(0), 3)
  return model, tuple(jax.tree.map(lambda x: 3.0 * x, model.init(k)) for k in keys)


@pytest.mark.parametrize("positions", ["rotary", "learned"])
def test_models_whose_positions_count_slots_are_refused(positions):
  slots, slot_params = _letter_lm(positions)
  free, free_params = _letter_lm("none")
  assert (slots.positions_count, free.positions_count) == ("slots", "tokens")
  prompts, valid = np.array([[2, 5, 7, 9]], np.int32), np.ones((1, 4), bool)
  with pytest.raises(ConfigError, match=r"model 2 \(expert 2\) has positions_count='slots'"):
    speculative.generate_speculative((free, free, slots), (*free_params[:2], slot_params[2]),
                                     prompts, valid, [8])


@pytest.mark.parametrize("positions", ["rotary", "none"])
def test_slot_positions_diverge_from_plain_decoding_and_no_positions_do_not(positions):
  """Why slot-counting models are refused: a round's padding slots after a rejected draft
  shift their positions, so (declared as counting tokens) their tokens differ from plain
  greedy decoding's; the same transformer without positions decodes exactly."""
  model, params = _letter_lm(positions)
  model = model._replace(positions_count="tokens")  # what a wrong declaration would let through
  prompts = np.array([[2, 5, 7, 9], [2, 4, 4, 6]], np.int32)
  kw = dict(stop_at_eos=False, max_new_tokens=N)
  plain = gen_lib.generate((model,) * 3, params, prompts, np.ones(prompts.shape, bool),
                           np.full(2, N), **kw)
  fast = speculative.generate_speculative((model,) * 3, params, prompts,
                                          np.ones(prompts.shape, bool), np.full(2, N),
                                          draft_len=3, **kw)
  assert np.all(fast.accepted_B < fast.drafted_B)  # drafts rejected: padding slots left
  same = np.array_equal(fast.gen.tokens_BxN, plain.tokens_BxN)
  assert same == (positions == "none")
