"""Composed generation for LLMs: every model prefills the prompt into its own KV cache, then all
advance in lockstep, one token per step, inside one jitted `lax.while_loop`.

Prompts are left-padded [B, P] (`prompt_valid_BxP` False on padding; the last column is a real
token of every row), so the generated tokens of every row sit in one [B, N] buffer; each model
may get a prompt of its own (a tuple of M arrays: CFG's two prompts, an expert's chat template),
prefilled into its own cache. Each step composes the models' next-token distributions
(`rules.step`: the spec's operator, the paper's with weights lambda or the authors' variant,
with the spec's gating, plausibility mask and EOS rule), picks a token (`sampling.pick`:
greedy, or sampled from each row's own key after temperature, top-k, top-p, min-p) and feeds it
to every model. A sequence finishes at EOS, when its generated tail equals one of
the stop sequences (token ids: turning stop *strings* into ids is the caller's job, with the
tokenizer, outside), or at its own budget; the loop ends when every sequence has finished.
Per-token diagnostics (log Z_t, p(EOS) composed and per model, KL(p_i || p_b) and the experts'
active sets as `diagnostics.diagnose` defines them) are recorded for analysis.
Shapes: B batch, P prompt, N new tokens, M models (background first), K = M - 1 experts.
"""

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from compgen_jax.composition import compose, rules, sampling, stacked
from compgen_jax.composition.diagnostics import kl
from compgen_jax.composition.spec import NO_TRUNCATION, PAPER, Spec, Truncation
from compgen_jax.lm.model import Model, prefill, same_vocabulary
from compgen_jax.types import Array, PRNGKey, PyTree

RUNNING, EOS, STOP, BUDGET = 0, 1, 2, 3  # finish reasons: REASONS[reason_B[b]]
REASONS = ("running", "eos", "stop", "budget")


class Generated(NamedTuple):
  tokens_BxN: Array      # generated tokens (the final EOS / stop sequence included), pad after
  lengths_B: Array       # tokens generated per sequence
  reason_B: Array        # EOS, STOP or BUDGET
  log_z_BxN: Array       # log Z_t of the untempered composition; 0 past a sequence's length
  p_eos_BxN: Array       # p(EOS) under the (untempered) composition
  p_eos_BxNxM: Array     # p(EOS) under each model, background first
  kl_BxNxK: Array        # KL(p_i || p_b) per expert
  active_BxNxK: Array    # KL above kl_threshold: the expert is active at this token
  num_steps: Array       # loop iterations run (< N when every sequence finished early)

  @property
  def num_active_BxN(self) -> Array:
    """The active-set size: how many experts are active at each token."""
    return self.active_BxNxK.sum(axis=-1)


def generate(models: Sequence[Model], params: Sequence[PyTree], prompts_BxP,
             prompt_valid_BxP, max_new_tokens_B, *,
             stop_sequences: Sequence[Sequence[int]] = (), stop_at_eos: bool = True,
             lam_K: Array | None = None, temperature: float = 1.0, greedy: bool = True,
             key: PRNGKey | None = None, prefill_chunk: int = 512,
             kl_threshold: float = 0.1, max_new_tokens: int | None = None,
             spec: Spec = PAPER, trunc: Truncation = NO_TRUNCATION,
             stack_models: bool = False) -> Generated:
  """Generates from the composition of models[0] (background) with models[1:] (experts).

  One model alone is plain decoding. `max_new_tokens_B` is each sequence's budget; the buffer
  holds `max_new_tokens` tokens (default: the largest budget; one compile per value).
  `prompts_BxP` / `prompt_valid_BxP`: one left-padded batch for every model, or a tuple of M
  (one per model, of any lengths). `spec.operator` names the operator (`compose.OPERATORS`;
  lam_K None: weights 1, or none for an operator without). Sampling draws row b from `key`
  (one key: row b uses fold_in(key, b)) or `key[b]` (B keys), so a row alone with its key
  samples what it samples in a batch. Called on the host: arguments are checked here, then one
  jitted program runs prefill and decoding.
  `stack_models`: models of one architecture decode as one vmapped forward over stacked params
  (`stacked.plan`; the same tokens, log-probs equal up to rounding).
  """
  num_models = len(models)
  prompts, valids = per_model(prompts_BxP, prompt_valid_BxP, num_models)
  budget_B = np.asarray(max_new_tokens_B, np.int32)
  stops = tuple(tuple(int(i) for i in s) for s in stop_sequences)
  num_new = int(budget_B.max(initial=0)) if max_new_tokens is None else max_new_tokens
  check_args(models, params, prompts, valids, budget_B, num_new, stops, lam_K, greedy,
             temperature, key, spec.operator, prefill_chunk)
  lam_K = compose.weights(spec.operator, lam_K, num_models - 1)
  keys_B = None if greedy else sampling.row_keys(key, len(budget_B))
  return _generate(
      tuple(params), prompts, valids,
      jnp.asarray(budget_B), None if lam_K is None else jnp.asarray(lam_K, jnp.float32),
      jnp.asarray(temperature, jnp.float32), keys_B,
      jnp.asarray(kl_threshold, jnp.float32), models=tuple(models), num_new=num_new,
      stops=stops, stop_at_eos=stop_at_eos, greedy=greedy, spec=spec, trunc=trunc,
      chunk=prefill_chunk, stack_models=stack_models)


def per_model(prompts_BxP, prompt_valid_BxP, num_models: int) -> tuple[tuple, tuple]:
  """(prompts, validity) as one [B, P] pair per model: a tuple of M as given, or one batch
  repeated."""
  if isinstance(prompts_BxP, tuple | list):
    return (tuple(jnp.asarray(p, jnp.int32) for p in prompts_BxP),
            tuple(jnp.asarray(v, bool) for v in prompt_valid_BxP))
  return ((jnp.asarray(prompts_BxP, jnp.int32),) * num_models,
          (jnp.asarray(prompt_valid_BxP, bool),) * num_models)


def check_args(models, params, prompts, valids, budget_B, num_new, stops, lam_K, greedy,
           temperature, key, operator, chunk) -> None:
  """ValueError, naming the argument, for anything `generate` cannot run."""
  weighted = compose.lookup(operator).weighted  # an unknown name, before anything compiles
  num_models = len(models)
  if num_models < 1 or len(params) != num_models:
    raise ValueError(f"{num_models} models and {len(params)} params: need one params per model")
  same_vocabulary(models)
  if len(prompts) != num_models or len(valids) != num_models:
    raise ValueError(f"{len(prompts)} prompt batches for {num_models} models: give one, or one "
                     "per model")
  batch = np.shape(valids[0])[0]
  if any(p.shape != v.shape or p.shape[0] != batch for p, v in zip(prompts, valids, strict=True)):
    raise ValueError(f"prompts and validity masks must be [{batch}, P] pairs, got "
                     f"{[(p.shape, v.shape) for p, v in zip(prompts, valids, strict=True)]}")
  if budget_B.shape != (batch,) or np.any(budget_B < 0):
    raise ValueError(f"max_new_tokens_B must be {batch} budgets >= 0, got {budget_B}")
  if num_new < 1 or np.any(budget_B > num_new):
    raise ValueError(f"budgets {budget_B} do not fit a buffer of {num_new} tokens")
  if not all(np.all(np.asarray(v)[:, -1]) for v in valids):
    raise ValueError("prompts must be left-padded: the last column must be a real token")
  vocab = models[0].vocab_size
  if any(not s or min(s) < 0 or max(s) >= vocab for s in stops):
    raise ValueError(f"stop sequences must be non-empty token ids in [0, {vocab}): {stops}")
  if not greedy and (key is None or not temperature > 0):
    raise ValueError("sampling needs a key and a temperature > 0")
  if not weighted and (lam_K is not None or num_models < 2):
    raise ValueError(f"the {operator!r} operator takes no lam_K and needs at least one expert")
  if lam_K is not None and np.shape(lam_K) != (num_models - 1,):
    raise ValueError(f"lam_K has shape {np.shape(lam_K)}, expected ({num_models - 1},)")
  if chunk < 1:
    raise ValueError(f"prefill_chunk must be >= 1, got {chunk}")


def _log_softmax(logits_BxV: Array) -> Array:
  return jax.nn.log_softmax(logits_BxV.astype(jnp.float32), axis=-1)


def stop_hit(tail_BxS: Array, length_B: Array, stops: tuple[tuple[int, ...], ...]) -> Array:
  """True where the last generated tokens equal a stop sequence (generated tokens only)."""
  hit_B = jnp.zeros(tail_BxS.shape[:1], bool)
  for s in stops:
    tail_BxL = tail_BxS[:, tail_BxS.shape[1] - len(s):]
    hit_B |= jnp.all(tail_BxL == jnp.asarray(s, jnp.int32)[None], axis=1) & (length_B >= len(s))
  return hit_B


def _put(buf_BxNx_, x_Bx_, mask_B, t):
  """Writes x at step t where mask_B (0 / False elsewhere)."""
  mask = mask_B.reshape(mask_B.shape + (1,) * (x_Bx_.ndim - 1))
  x_Bx_ = jnp.where(mask, x_Bx_, jnp.zeros((), x_Bx_.dtype))
  return jax.lax.dynamic_update_index_in_dim(buf_BxNx_, x_Bx_, t, 1)


@functools.partial(jax.jit, static_argnames=(
    "models", "num_new", "stops", "stop_at_eos", "greedy", "spec", "trunc", "chunk",
    "stack_models"))
def _generate(params, prompts, valids, budget_B, lam_K, temperature, keys_B, kl_threshold,
              *, models, num_new, stops, stop_at_eos, greedy, spec, trunc, chunk, stack_models):
  batch = prompts[0].shape[0]
  eos_id, pad_id = models[0].eos_id, models[0].pad_id
  num_models = len(models)
  outs = [prefill(m, p, x_BxP, v_BxP, m.init_cache(batch, x_BxP.shape[1] + num_new), chunk)
          for m, p, x_BxP, v_BxP in zip(models, params, prompts, valids, strict=True)]
  logp_MxBxV = jnp.stack([_log_softmax(logits) for logits, _ in outs])
  # the decode loop runs each group of same-shaped models as one vmapped forward
  groups = stacked.plan(models, params, [c for _, c in outs], stack_models)
  group_params = stacked.stack(groups, params)
  zeros = lambda *shape, dtype=jnp.float32: jnp.zeros((batch, num_new) + shape, dtype)
  init = dict(
      t=jnp.zeros((), jnp.int32),
      caches=stacked.stack(groups, [c for _, c in outs], caches=True),
      logp=logp_MxBxV,
      tokens=jnp.full((batch, num_new), pad_id, jnp.int32), length=jnp.zeros((batch,), jnp.int32),
      reason=jnp.where(budget_B <= 0, BUDGET, RUNNING).astype(jnp.int32),
      tail=jnp.full((batch, max([len(s) for s in stops], default=1)), pad_id, jnp.int32),
      log_z=zeros(), p_eos=zeros(), p_eos_m=zeros(num_models), kl=zeros(num_models - 1),
      active=zeros(num_models - 1, dtype=bool))

  def cond(c):
    return (c["t"] < num_new) & jnp.any(c["reason"] == RUNNING)

  def body(c):
    t, logp_MxBxV, running_B = c["t"], c["logp"], c["reason"] == RUNNING
    # untempered composition for the diagnostics; temperature only shapes the sampling
    logp_BxV, log_z_B = rules.step(logp_MxBxV, lam_K, spec, eos_id)
    next_B = sampling.pick(logp_BxV, keys_B, t, greedy, temperature, trunc)
    next_B = jnp.where(running_B, next_B, pad_id).astype(jnp.int32)
    length_B = c["length"] + running_B
    tail_BxS = jnp.concatenate([c["tail"][:, 1:], next_B[:, None]], axis=1)
    eos_B = running_B & (next_B == eos_id) & stop_at_eos
    stop_B = running_B & stop_hit(tail_BxS, length_B, stops)
    budget_hit_B = running_B & (length_B >= budget_B)
    reason_B = jnp.where(eos_B, EOS, jnp.where(stop_B, STOP, jnp.where(
        budget_hit_B, BUDGET, c["reason"])))
    kl_BxK = kl(logp_MxBxV[1:], logp_MxBxV[:1]).T
    new = dict(
        t=t + 1, length=length_B, reason=reason_B, tail=tail_BxS,
        tokens=jax.lax.dynamic_update_index_in_dim(c["tokens"], next_B, t, 1),
        log_z=_put(c["log_z"], log_z_B, running_B, t),
        p_eos=_put(c["p_eos"], jnp.exp(logp_BxV[:, eos_id]), running_B, t),
        p_eos_m=_put(c["p_eos_m"], jnp.exp(logp_MxBxV[:, :, eos_id]).T, running_B, t),
        kl=_put(c["kl"], kl_BxK, running_B, t),
        active=_put(c["active"], kl_BxK > kl_threshold, running_B, t))
    # every model is fed the chosen token; finished rows get padding, never attended to
    logits, new["caches"] = stacked.apply(groups, models, group_params, next_B[:, None],
                                          c["caches"], running_B[:, None])
    new["logp"] = jnp.stack([_log_softmax(logits_Bx1xV[:, 0]) for logits_Bx1xV in logits])
    return new

  c = jax.lax.while_loop(cond, body, init)
  return Generated(c["tokens"], c["length"], c["reason"], c["log_z"], c["p_eos"], c["p_eos_m"],
                   c["kl"], c["active"], c["t"])


def summarize(gen: Generated) -> dict[str, Array]:
  """Diagnostics over all generated tokens, defined as in `diagnostics.diagnose`: active_frac_K,
  overlap_KxK (fraction of tokens where experts i and j are both active), mean / max |log Z_t|,
  mean composed p(EOS) and mean p(EOS) per model (M)."""
  num_new = gen.tokens_BxN.shape[1]
  valid_BxN = jnp.arange(num_new)[None] < gen.lengths_B[:, None]
  num_valid = jnp.maximum(valid_BxN.sum(), 1).astype(jnp.float32)
  act_BxNxK = gen.active_BxNxK.astype(jnp.float32)
  abs_log_z = jnp.abs(gen.log_z_BxN)  # 0 past the lengths
  return {
      "active_frac_K": act_BxNxK.sum(axis=(0, 1)) / num_valid,
      "overlap_KxK": jnp.einsum("bnk,bnj->kj", act_BxNxK, act_BxNxK) / num_valid,
      "mean_abs_log_z": abs_log_z.sum() / num_valid, "max_abs_log_z": abs_log_z.max(),
      "mean_p_eos": gen.p_eos_BxN.sum() / num_valid,
      "mean_p_eos_M": gen.p_eos_BxNxM.sum(axis=(0, 1)) / num_valid,
  }
