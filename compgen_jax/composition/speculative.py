"""Composed decoding with the background as the draft model: exact greedy outputs, or samples
from plain composed sampling's distribution.

Each round the background drafts n tokens on its own (n one-token steps); every expert then
scores all n in one forward over its cache, which gives each model's distribution after every
drafted prefix, and `rules.step` composes them at each of the n + 1 positions. Greedy: the
longest prefix of drafts equal to the composed argmaxes is accepted, and the composed argmax
after it (a correction, or a bonus token when all n were accepted) is emitted too: 1 to n + 1
tokens per round, each the token plain composed greedy decoding would choose. Sampling: the
background samples its drafts from q (its log-probs under the temperature and truncation), the
target p is the composition under the same (as `sampling.pick` samples it), and draft j is
accepted with probability min(1, p_j(x_j) / q_j(x_j)); the token after the accepted prefix is
drawn from norm(max(0, p - q)) (from p after n accepted drafts), so every emitted token is
distributed as plain composed sampling's (speculative sampling: Leviathan et al. 2023, Chen et
al. 2023). Where the experts agree with the background (a factorized region), drafts are
accepted. Rounds leave padding slots in the caches, so every model's positions must count
tokens (`Model.positions_count`; `check_positions`).

Caches are pure values, so a round starts again from the caches before it: every model appends
the emitted tokens as one block of n + 1 slots, the slots past a row's emitted tokens marked
invalid (padding, never attended to; positions count valid tokens), whose logits at the last
emitted token are the next round's distributions. Cache memory: P + N (n + 1) + n slots.
Emitted tokens are cut at the budget, EOS or a stop sequence as `generate` cuts them, and get
the same per-token diagnostics, so the result is a `generate.Generated`.
Shapes: B batch, P prompt, N new tokens, M models (background first), K = M - 1 experts,
n = draft_len, n1 = n + 1.
"""

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from compgen_jax.composition import compose, rules, sampling, stacked
from compgen_jax.composition import generate as gen_lib
from compgen_jax.composition.spec import NO_TRUNCATION, PAPER, Spec, Truncation
from compgen_jax.lm.model import Model, prefill
from compgen_jax.types import Array, ConfigError, PRNGKey, PyTree


class Speculated(NamedTuple):
  gen: gen_lib.Generated  # greedy: what generate returns for the same arguments; sampling: a
                          # draw from the distribution of generate's
  num_rounds: Array    # rounds run: one forward per expert each (plain decoding: N steps)
  drafted_B: Array     # drafted tokens scored while the row was running
  accepted_B: Array    # of which accepted

  @property
  def acceptance(self) -> Array:
    """The fraction of the call's drafts accepted (every row's together)."""
    return self.accepted_B.sum() / jnp.maximum(self.drafted_B.sum(), 1)


def generate_speculative(models: Sequence[Model], params: Sequence[PyTree], prompts_BxP,
                         prompt_valid_BxP, max_new_tokens_B, *, draft_len: int = 4,
                         stop_sequences: Sequence[Sequence[int]] = (), stop_at_eos: bool = True,
                         lam_K: Array | None = None, spec: Spec = PAPER,
                         greedy: bool = True, temperature: float = 1.0,
                         key: PRNGKey | None = None, trunc: Truncation = NO_TRUNCATION,
                         prefill_chunk: int = 512, kl_threshold: float = 0.1,
                         max_new_tokens: int | None = None,
                         stack_models: bool = False) -> Speculated:
  """Composition of models[0] (background, the draft) with models[1:]: greedy, what
  `generate.generate` returns for the same arguments (prompts: one batch, or one per model);
  sampling (greedy=False, key, temperature, trunc as there), a draw from the distribution
  generate samples from (row b from its own key, as there). `stack_models`: experts of one
  architecture score and append as one vmapped forward (`stacked.plan`). Called on the host."""
  budget_B = np.asarray(max_new_tokens_B, np.int32)
  stops = tuple(tuple(int(i) for i in s) for s in stop_sequences)
  num_new = int(budget_B.max(initial=0)) if max_new_tokens is None else max_new_tokens
  prompts, valids = gen_lib.per_model(prompts_BxP, prompt_valid_BxP, len(models))
  gen_lib.check_args(models, params, prompts, valids, budget_B, num_new, stops, lam_K, greedy,
                     temperature, key, spec.operator, prefill_chunk)
  if draft_len < 1:
    raise ValueError(f"draft_len must be >= 1, got {draft_len}")
  check_positions(models)
  lam_K = compose.weights(spec.operator, lam_K, len(models) - 1)
  keys_B = None if greedy else sampling.row_keys(key, len(budget_B))
  return _speculate(tuple(params), prompts, valids, jnp.asarray(budget_B),
                    None if lam_K is None else jnp.asarray(lam_K, jnp.float32),
                    jnp.asarray(kl_threshold, jnp.float32), keys_B,
                    jnp.asarray(temperature, jnp.float32), models=tuple(models),
                    num_new=num_new, draft=draft_len, spec=spec, stops=stops,
                    stop_at_eos=stop_at_eos, chunk=prefill_chunk, stack_models=stack_models,
                    trunc=trunc)


def check_positions(models: Sequence[Model]) -> None:
  """ConfigError unless every model's positions count tokens: a round leaves padding slots
  after its rejected drafts, which would shift the positions of a model that counts slots
  (its tokens would silently differ from plain decoding's from the first rejected draft)."""
  for i, m in enumerate(models):
    if m.positions_count != "tokens":
      role = "the background" if i == 0 else f"expert {i}"
      raise ConfigError("draft_len", f"speculative decoding needs models whose positions count "
                        f"tokens, but model {i} ({role}) has positions_count="
                        f"{m.positions_count!r} (its positions number cache slots, padding "
                        "included, e.g. the letter transformer with rotary or learned "
                        "positions): decode it with draft_len=0")


def _log_softmax(logits):
  return jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)


def _draft(model, params, cache, logp_BxV, n, pick):
  """The background's n drafts [B, n] (`pick(logp_BxV, j)`: draft j) and its distributions
  after each [B, n, V]."""
  def body(carry, j):
    cache, logp_BxV = carry
    tok_B = pick(logp_BxV, j)
    logits, cache = model.apply(params, tok_B[:, None], cache, jnp.ones((tok_B.shape[0], 1), bool))
    logp_BxV = _log_softmax(logits[:, 0])
    return (cache, logp_BxV), (tok_B, logp_BxV)
  _, (tok_nxB, logp_nxBxV) = jax.lax.scan(body, (cache, logp_BxV), jnp.arange(n))
  return tok_nxB.T, jnp.swapaxes(logp_nxBxV, 0, 1)


def accept_sampled(key_B: Array, drafts_Bxn: Array, draft_logits_BxnxV: Array,
                   target_logits_Bxn1xV: Array) -> tuple[Array, Array]:
  """Speculative sampling's rule: draft x_j (drawn from q_j = softmax(draft_logits_j)) is
  accepted with probability min(1, p_j(x_j) / q_j(x_j)), p_j = softmax(target_logits_j),
  while every draft before it was; after the a accepted drafts the next token is drawn from
  norm(max(0, p_a - q_a)) (p_n when a = n; p_a should the residual vanish in rounding).
  Returns (a [B], choices [B, n1]: the drafts before a, the new token at a)."""
  n = drafts_Bxn.shape[1]
  p_Bxn1xV = jax.nn.softmax(target_logits_Bxn1xV, axis=-1)
  q_Bxn1xV = jnp.pad(jax.nn.softmax(draft_logits_BxnxV, axis=-1), ((0, 0), (0, 1), (0, 0)))
  keys_Bx2 = jax.vmap(jax.random.split)(key_B)
  u_Bxn = jax.vmap(lambda k: jax.random.uniform(k, (n,)))(keys_Bx2[:, 0])
  at = lambda x_BxnxV: jnp.take_along_axis(x_BxnxV, drafts_Bxn[..., None], axis=-1)[..., 0]
  ok_Bxn = u_Bxn * at(q_Bxn1xV[:, :n]) < at(p_Bxn1xV[:, :n])
  accepted_B = jnp.sum(jnp.cumprod(ok_Bxn, axis=1), axis=1)
  residual_Bxn1xV = jnp.maximum(p_Bxn1xV - q_Bxn1xV, 0.0)
  empty_Bxn1x1 = residual_Bxn1xV.sum(axis=-1, keepdims=True) <= 0
  logits_Bxn1xV = jnp.where(empty_Bxn1x1, target_logits_Bxn1xV, jnp.log(residual_Bxn1xV))
  new_Bxn1 = jax.vmap(jax.random.categorical)(keys_Bx2[:, 1], logits_Bxn1xV)
  steps_n1 = jnp.arange(n + 1)
  drafts_Bxn1 = jnp.pad(drafts_Bxn, ((0, 0), (0, 1)))
  return accepted_B, jnp.where(steps_n1[None] < accepted_B[:, None], drafts_Bxn1,
                               new_Bxn1).astype(jnp.int32)


def _cut(choice_Bxn1, emit_Bxn1, c, budget_B, eos_id, stops, stop_at_eos):
  """Emission cut after the first EOS or stop sequence, as generate does token by token:
  (emit [B, n1], tail, reason [B])."""
  tail_BxS, reason_B, on_B = c["tail"], c["reason"], c["reason"] == gen_lib.RUNNING
  out = []
  for j in range(choice_Bxn1.shape[1]):
    emit_B = emit_Bxn1[:, j] & on_B
    tail_BxS = jnp.where(emit_B[:, None], jnp.concatenate(
        [tail_BxS[:, 1:], choice_Bxn1[:, j:j + 1]], axis=1), tail_BxS)
    length_B = c["length"] + j + 1
    eos_B = emit_B & (choice_Bxn1[:, j] == eos_id) & stop_at_eos
    stop_B = emit_B & gen_lib.stop_hit(tail_BxS, length_B, stops)
    budget_hit_B = emit_B & (length_B >= budget_B)
    reason_B = jnp.where(eos_B, gen_lib.EOS, jnp.where(stop_B, gen_lib.STOP, jnp.where(
        budget_hit_B, gen_lib.BUDGET, reason_B)))
    on_B &= reason_B == gen_lib.RUNNING
    out.append(emit_B)
  return jnp.stack(out, axis=1), tail_BxS, reason_B


def _scatter(buf_BxNx_, x_Bxn1x_, where_Bxn1):
  """Writes x[b, j] at buf[b, where[b, j]] (an index past N is dropped)."""
  return jax.vmap(lambda row, idx, val: row.at[idx].set(val, mode="drop"))(
      buf_BxNx_, where_Bxn1, x_Bxn1x_)


@functools.partial(jax.jit, static_argnames=("models", "num_new", "draft", "spec", "stops",
                                             "stop_at_eos", "chunk", "stack_models", "trunc"))
def _speculate(params, prompts, valids, budget_B, lam_K, kl_threshold, keys_B, temperature, *,
               models, num_new, draft, spec, stops, stop_at_eos, chunk, stack_models, trunc):
  batch = prompts[0].shape[0]
  eos_id, pad_id = models[0].eos_id, models[0].pad_id
  num_models, greedy = len(models), keys_B is None
  room = num_new * (draft + 1) + draft
  outs = [prefill(m, p, x_BxP, v_BxP, m.init_cache(batch, x_BxP.shape[1] + room), chunk)
          for m, p, x_BxP, v_BxP in zip(models, params, prompts, valids, strict=True)]
  steps_n1 = jnp.arange(draft + 1)
  # the experts (not the background, which drafts alone) grouped into vmapped forwards
  experts = models[1:]
  groups = stacked.plan(experts, params[1:], [c for _, c in outs[1:]], stack_models)
  expert_params = stacked.stack(groups, params[1:])
  zeros = lambda *shape, dtype=jnp.float32: jnp.zeros((batch, num_new) + shape, dtype)
  init = dict(
      rounds=jnp.zeros((), jnp.int32),
      caches=(outs[0][1], stacked.stack(groups, [c for _, c in outs[1:]], caches=True)),
      logp=jnp.stack([_log_softmax(logits) for logits, _ in outs]),
      tokens=jnp.full((batch, num_new), pad_id, jnp.int32), length=jnp.zeros((batch,), jnp.int32),
      reason=jnp.where(budget_B <= 0, gen_lib.BUDGET, gen_lib.RUNNING).astype(jnp.int32),
      tail=jnp.full((batch, max([len(s) for s in stops], default=1)), pad_id, jnp.int32),
      log_z=zeros(), p_eos=zeros(), p_eos_m=zeros(num_models), kl=zeros(num_models - 1),
      active=zeros(num_models - 1, dtype=bool),
      drafted=jnp.zeros((batch,), jnp.int32), accepted=jnp.zeros((batch,), jnp.int32))

  def cond(c):
    return (c["rounds"] < num_new) & jnp.any(c["reason"] == gen_lib.RUNNING)

  def body(c):
    (cache_b, caches_e), logp_MxBxV = c["caches"], c["logp"]
    running_B = c["reason"] == gen_lib.RUNNING
    if greedy:
      pick = lambda logp_BxV, j: sampling.pick(logp_BxV, None, j, True)
    else:  # row b's round keys: fold_in(keys_B[b], round), one for the drafts, one to accept
      keys_Bx2 = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, c["rounds"])))(keys_B)
      pick = lambda logp_BxV, j: sampling.pick(logp_BxV, keys_Bx2[:, 0], j, False,
                                               temperature, trunc)
    drafts_Bxn, logp_b_BxnxV = _draft(models[0], params[0], cache_b, logp_MxBxV[0], draft,
                                      pick)
    scored, _ = stacked.apply(groups, experts, expert_params, drafts_Bxn, caches_e,
                              jnp.ones(drafts_Bxn.shape, bool))
    after = [logp_b_BxnxV] + [_log_softmax(logits) for logits in scored]
    # each model's distribution before every draft and after the last: [M, B, n1, V]
    logp_MxBxn1xV = jnp.concatenate([logp_MxBxV[:, :, None], jnp.stack(after)], axis=2)
    composed_Bxn1xV, log_z_Bxn1 = rules.step(logp_MxBxn1xV, lam_K, spec, eos_id)
    if greedy:
      choice_Bxn1 = jnp.argmax(composed_Bxn1xV, axis=-1).astype(jnp.int32)
      accepted_B = jnp.sum(jnp.cumprod(choice_Bxn1[:, :draft] == drafts_Bxn, axis=1), axis=1)
    else:
      accepted_B, choice_Bxn1 = accept_sampled(
          keys_Bx2[:, 1], drafts_Bxn,
          sampling.sampled_logits(logp_MxBxn1xV[0, :, :draft], temperature, trunc),
          sampling.sampled_logits(composed_Bxn1xV, temperature, trunc))
    emit_Bxn1, tail_BxS, reason_B = _cut(choice_Bxn1, steps_n1[None] <= accepted_B[:, None],
                                         c, budget_B, eos_id, stops, stop_at_eos)
    count_B = emit_Bxn1.sum(axis=1)
    where_Bxn1 = jnp.where(emit_Bxn1, c["length"][:, None] + steps_n1[None], num_new)
    kl_Bxn1xK = jnp.moveaxis(rules.kl_to_background(logp_MxBxn1xV), 0, -1)
    new = dict(
        rounds=c["rounds"] + 1, length=c["length"] + count_B, reason=reason_B, tail=tail_BxS,
        tokens=_scatter(c["tokens"], choice_Bxn1, where_Bxn1),
        log_z=_scatter(c["log_z"], log_z_Bxn1, where_Bxn1),
        p_eos=_scatter(c["p_eos"], jnp.exp(composed_Bxn1xV[..., eos_id]), where_Bxn1),
        p_eos_m=_scatter(c["p_eos_m"], jnp.moveaxis(jnp.exp(logp_MxBxn1xV[..., eos_id]), 0, -1),
                         where_Bxn1),
        kl=_scatter(c["kl"], kl_Bxn1xK, where_Bxn1),
        active=_scatter(c["active"], kl_Bxn1xK > kl_threshold, where_Bxn1),
        drafted=c["drafted"] + draft * running_B,
        accepted=c["accepted"] + jnp.minimum(accepted_B, count_B))
    # every model appends the emitted tokens from the caches before the round
    block_Bxn1 = jnp.where(emit_Bxn1, choice_Bxn1, pad_id)
    logits_b, cache_b = models[0].apply(params[0], block_Bxn1, cache_b, emit_Bxn1)
    logits_e, caches_e = stacked.apply(groups, experts, expert_params, block_Bxn1, caches_e,
                                       emit_Bxn1)
    last_B = jnp.maximum(count_B - 1, 0)
    new["logp"] = jnp.stack([_log_softmax(jnp.take_along_axis(
        logits, last_B[:, None, None], axis=1)[:, 0]) for logits in [logits_b, *logits_e]])
    new["caches"] = (cache_b, caches_e)
    return new

  c = jax.lax.while_loop(cond, body, init)
  gen = gen_lib.Generated(c["tokens"], c["length"], c["reason"], c["log_z"], c["p_eos"],
                          c["p_eos_m"], c["kl"], c["active"], c["rounds"])
  return Speculated(gen, c["rounds"], c["drafted"], c["accepted"])
