"""Exact greedy composed decoding with the background as the draft model.

Each round the background drafts n tokens greedily on its own (n one-token steps); every expert
then scores all n in one forward over its cache, which gives each model's distribution after
every drafted prefix; `rules.step` composes them and the composed argmax is taken at each of the
n + 1 positions. The longest prefix of drafts equal to those argmaxes is accepted, and the
composed argmax after it (a correction, or a bonus token when all n were accepted) is emitted
too: 1 to n + 1 tokens per round, each the token plain composed greedy decoding would choose.
Where the experts agree with the background (a factorized region), drafts are accepted.

Caches are pure values, so a round starts again from the caches before it: every model appends
the emitted tokens as one block of n + 1 slots, the slots past a row's emitted tokens marked
invalid (padding, never attended to; positions count valid tokens), whose logits at the last
emitted token are the next round's distributions. Cache memory: P + N (n + 1) + n slots.
Shapes: B batch, P prompt, N new tokens, M models (background first), n = draft_len.
"""

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from compgen_jax.composition import rules
from compgen_jax.composition.generate import BUDGET, EOS, RUNNING, check_args
from compgen_jax.composition.spec import PAPER, Spec
from compgen_jax.lm.model import Model, prefill
from compgen_jax.types import Array, PyTree


class Speculated(NamedTuple):
  tokens_BxN: Array    # generated tokens (the final EOS included), pad after
  lengths_B: Array     # tokens generated per sequence
  reason_B: Array      # EOS or BUDGET (generate.REASONS)
  num_rounds: Array    # rounds run: one forward per expert each (plain decoding: N steps)
  drafted_B: Array     # drafted tokens scored while the row was running
  accepted_B: Array    # of which accepted


def generate_speculative(models: Sequence[Model], params: Sequence[PyTree], prompts_BxP: Array,
                         prompt_valid_BxP: Array, max_new_tokens_B, *, draft_len: int = 4,
                         lam_K: Array | None = None, spec: Spec = PAPER,
                         stop_at_eos: bool = True, prefill_chunk: int = 512,
                         max_new_tokens: int | None = None) -> Speculated:
  """Greedy composition of models[0] (background, the draft) with models[1:]; the tokens of
  `generate.generate(..., greedy=True)` with the same arguments. Called on the host."""
  budget_B = np.asarray(max_new_tokens_B, np.int32)
  num_new = int(budget_B.max(initial=0)) if max_new_tokens is None else max_new_tokens
  prompts = (jnp.asarray(prompts_BxP, jnp.int32),)
  valids = (jnp.asarray(prompt_valid_BxP, bool),)
  check_args(models, params, prompts * len(models), valids * len(models), budget_B, num_new, (),
         lam_K, True, 1.0, None, spec.authors, prefill_chunk)
  if draft_len < 1:
    raise ValueError(f"draft_len must be >= 1, got {draft_len}")
  if lam_K is None and not spec.authors:
    lam_K = jnp.ones((len(models) - 1,), jnp.float32)
  return _speculate(tuple(params), prompts[0], valids[0], jnp.asarray(budget_B),
                    None if lam_K is None else jnp.asarray(lam_K, jnp.float32),
                    models=tuple(models), num_new=num_new, draft=draft_len, spec=spec,
                    stop_at_eos=stop_at_eos, chunk=prefill_chunk)


def _log_softmax(logits):
  return jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)


def _draft(model, params, cache, logp_BxV, n):
  """The background's n greedy tokens [B, n] and its distributions after each [B, n, V]."""
  def body(carry, _):
    cache, logp_BxV = carry
    tok_B = jnp.argmax(logp_BxV, axis=-1).astype(jnp.int32)
    logits, cache = model.apply(params, tok_B[:, None], cache, jnp.ones((tok_B.shape[0], 1), bool))
    logp_BxV = _log_softmax(logits[:, 0])
    return (cache, logp_BxV), (tok_B, logp_BxV)
  _, (tok_nxB, logp_nxBxV) = jax.lax.scan(body, (cache, logp_BxV), None, length=n)
  return tok_nxB.T, jnp.swapaxes(logp_nxBxV, 0, 1)


@functools.partial(jax.jit, static_argnames=("models", "num_new", "draft", "spec",
                                             "stop_at_eos", "chunk"))
def _speculate(params, prompts_BxP, valid_BxP, budget_B, lam_K, *, models, num_new, draft,
               spec, stop_at_eos, chunk):
  batch, length = prompts_BxP.shape
  eos_id, pad_id = models[0].eos_id, models[0].pad_id
  size = length + num_new * (draft + 1) + draft
  outs = [prefill(m, p, prompts_BxP, valid_BxP, m.init_cache(batch, size), chunk)
          for m, p in zip(models, params, strict=True)]
  steps_n1 = jnp.arange(draft + 1)
  init = dict(
      rounds=jnp.zeros((), jnp.int32), caches=tuple(c for _, c in outs),
      logp=jnp.stack([_log_softmax(logits) for logits, _ in outs]),
      tokens=jnp.full((batch, num_new), pad_id, jnp.int32), length=jnp.zeros((batch,), jnp.int32),
      reason=jnp.where(budget_B <= 0, BUDGET, RUNNING).astype(jnp.int32),
      drafted=jnp.zeros((batch,), jnp.int32), accepted=jnp.zeros((batch,), jnp.int32))

  def cond(c):
    return (c["rounds"] < num_new) & jnp.any(c["reason"] == RUNNING)

  def body(c):
    caches, logp_MxBxV, running_B = c["caches"], c["logp"], c["reason"] == RUNNING
    drafts_Bxn, logp_b_BxnxV = _draft(models[0], params[0], caches[0], logp_MxBxV[0], draft)
    after = [logp_b_BxnxV] + [
        _log_softmax(m.apply(p, drafts_Bxn, cache, jnp.ones(drafts_Bxn.shape, bool))[0])
        for m, p, cache in zip(models[1:], params[1:], caches[1:], strict=True)]
    # each model's distribution before every draft and after the last: [M, B, n + 1, V]
    logp_MxBxn1xV = jnp.concatenate([logp_MxBxV[:, :, None], jnp.stack(after)], axis=2)
    composed_BxN1xV, _ = rules.step(logp_MxBxn1xV, lam_K, spec, eos_id)
    choice_Bxn1 = jnp.argmax(composed_BxN1xV, axis=-1).astype(jnp.int32)
    accepted_B = jnp.sum(jnp.cumprod(choice_Bxn1[:, :draft] == drafts_Bxn, axis=1), axis=1)
    # emitted: choices 0..accepted, cut at the budget and after the first EOS
    emit_Bxn1 = steps_n1[None] <= accepted_B[:, None]
    emit_Bxn1 &= steps_n1[None] < (budget_B - c["length"])[:, None]
    is_eos_Bxn1 = emit_Bxn1 & (choice_Bxn1 == eos_id) & stop_at_eos
    emit_Bxn1 &= jnp.cumsum(is_eos_Bxn1, axis=1) - is_eos_Bxn1 == 0
    emit_Bxn1 &= running_B[:, None]
    count_B = emit_Bxn1.sum(axis=1)
    where_Bxn1 = jnp.where(emit_Bxn1, c["length"][:, None] + steps_n1[None], num_new)
    tokens = jax.vmap(lambda row, idx, val: row.at[idx].set(val, mode="drop"))(
        c["tokens"], where_Bxn1, choice_Bxn1)
    length_B = c["length"] + count_B
    reason_B = jnp.where(running_B & jnp.any(is_eos_Bxn1 & emit_Bxn1, axis=1), EOS, jnp.where(
        running_B & (length_B >= budget_B), BUDGET, c["reason"]))
    # every model appends the emitted tokens from the caches before the round
    block = [m.apply(p, jnp.where(emit_Bxn1, choice_Bxn1, pad_id), cache, emit_Bxn1)
             for m, p, cache in zip(models, params, caches, strict=True)]
    last_B = jnp.maximum(count_B - 1, 0)
    logp_MxBxV = jnp.stack([_log_softmax(jnp.take_along_axis(
        logits, last_B[:, None, None], axis=1)[:, 0]) for logits, _ in block])
    return dict(rounds=c["rounds"] + 1, caches=tuple(cache for _, cache in block),
                logp=logp_MxBxV, tokens=tokens, length=length_B, reason=reason_B,
                drafted=c["drafted"] + draft * running_B,
                accepted=c["accepted"] + jnp.minimum(accepted_B, count_B) * running_B)

  c = jax.lax.while_loop(cond, body, init)
  return Speculated(c["tokens"], c["length"], c["reason"], c["rounds"], c["drafted"],
                    c["accepted"])
