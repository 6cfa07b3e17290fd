"""Prompts in, completions out: tokenizing, batching with left padding, composed generation
(`composition.generate`, or `composition.speculative` with generate.draft_len > 0) and
per-completion diagnostics.

Prompts are sorted by length and batched; each batch is left-padded to a multiple of `pad_to`
tokens and filled to `batch_size` rows (fillers have budget 0), so a whole benchmark compiles a
handful of programs. A composition's members may each read the prompt through a template of
their own (`systems.System.templates`); each gets its own padded batch. Sampling draws problem
i from the 'decode/<id>' stream of the run key, so a problem's sample does not depend on its
batch, the batch size or a resume. Stop strings end a row early when their tokens appear (a
best-effort shortcut: the text is cut at the first stop string afterwards anyway, which
decides).
"""

from collections.abc import Iterator, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from compgen_jax import rng
from compgen_jax.composition import compose as compose_lib
from compgen_jax.composition import generate, speculative
from compgen_jax.composition import spec as spec_lib
from compgen_jax.llm_eval import systems
from compgen_jax.llm_eval.benchmarks import truncate
from compgen_jax.lm.model import Model
from compgen_jax.types import PyTree


def encode(sp, bos_id: int, prompt: str) -> list[int]:
  return [bos_id] + list(sp.encode(prompt))


def batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
  """Indices grouped into batches of similar length (longest first: the worst compile and
  memory peak come at once)."""
  order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
  return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def left_pad(seqs: list[list[int]], pad_id: int, pad_to: int, rows: int
             ) -> tuple[np.ndarray, np.ndarray]:
  """[rows, P] tokens and validity, P the longest rounded up to `pad_to`; missing rows repeat
  the last sequence (their budget is 0)."""
  length = -(-max(len(s) for s in seqs) // pad_to) * pad_to
  seqs = list(seqs) + [seqs[-1]] * (rows - len(seqs))
  tokens = np.full((rows, length), pad_id, np.int32)
  valid = np.zeros((rows, length), bool)
  for i, s in enumerate(seqs):
    tokens[i, length - len(s):] = s
    valid[i, length - len(s):] = True
  return tokens, valid


def stop_tokens(sp, stop_strings: Sequence[str]) -> tuple[tuple[int, ...], ...]:
  """Stop strings as token sequences (as the tokenizer writes them on their own)."""
  return tuple(ids for ids in (tuple(sp.encode(s)) for s in stop_strings) if ids)


def expert_weights(step_spec, compose, weights: Sequence[float], num_experts: int
                   ) -> np.ndarray | None:
  """The experts' weights a composed decode uses: `weights`, else compose.lam, else all 1
  (`compose.weights`); None for an operator without weights (the authors')."""
  lam = compose_lib.weights(step_spec.operator, tuple(weights or compose.lam) or None,
                            num_experts)
  return None if lam is None else np.asarray(lam, np.float32)


def completions(models: tuple[Model, ...], params: tuple[PyTree, ...], sp,
                prompts: list[str], stop_strings: Sequence[str],
                gen: ml_collections.ConfigDict, compose: ml_collections.ConfigDict,
                seed: int = 0, templates: Sequence[str] = (), weights: Sequence[float] = (),
                ids: Sequence[str] | None = None) -> Iterator[tuple[list[int], list[dict]]]:
  """Yields (prompt indices, rows) per batch: each row the completion cut at the first stop
  string, its raw text, token count, finish reason and the composition diagnostics.
  `templates`: one per model (() = the prompt itself); `weights`: one per expert (() =
  compose.lam, or all 1); `ids` name the problems' sampling streams (default: their
  indices)."""
  model = models[0]
  templates = tuple(templates) or (systems.PROMPT,) * len(models)
  encoded = [[encode(sp, model.bos_id, systems.apply_template(t, p)) for p in prompts]
             for t in templates]
  ids = [str(i) for i in range(len(prompts))] if ids is None else [str(i) for i in ids]
  stops = stop_tokens(sp, stop_strings)
  composed = len(models) > 1
  step_spec = spec_lib.from_config(compose) if composed else spec_lib.PAPER
  lam = expert_weights(step_spec, compose, weights, len(models) - 1) if composed else None
  run_key = rng.run_key(seed, 0)
  for idx in batches([len(e) for e in encoded[0]], gen.batch_size):
    padded = [left_pad([e[i] for i in idx], model.pad_id, gen.pad_to, gen.batch_size)
              for e in encoded]
    budget = np.zeros(gen.batch_size, np.int32)
    budget[:len(idx)] = gen.max_new_tokens
    rows = list(idx) + [idx[-1]] * (gen.batch_size - len(idx))  # fillers: budget 0
    keys = None if gen.greedy else jnp.stack(
        [rng.stream(run_key, f"decode/{ids[i]}") for i in rows])
    kw = dict(stop_sequences=stops, lam_K=lam, prefill_chunk=gen.prefill_chunk,
              kl_threshold=compose.kl_threshold, max_new_tokens=gen.max_new_tokens,
              spec=step_spec, stack_models=bool(gen.get("stack_models", False)))
    prompts_M = (tuple(t for t, _ in padded), tuple(v for _, v in padded))
    kw.update(temperature=gen.temperature, greedy=gen.greedy, key=keys,
              trunc=spec_lib.truncation(gen))
    drafts = None
    if composed and gen.get("draft_len", 0):  # the same outputs (greedy) or distribution
      fast = speculative.generate_speculative(models, params, *prompts_M, budget,
                                              draft_len=gen.draft_len, **kw)
      out, drafts = fast.gen, (fast.drafted_B, fast.accepted_B)
    else:
      out = generate.generate(models, params, *prompts_M, budget, **kw)
    yield idx, _rows(jax.device_get(out), sp, model.eos_id, stop_strings, len(idx), composed,
                     jax.device_get(drafts))


def _rows(out: generate.Generated, sp, eos_id: int, stop_strings, num: int,
          composed: bool, drafts: tuple | None = None) -> list[dict]:
  """`drafts`: speculative decoding's (drafted [B], accepted [B]), recorded per row."""
  rows = []
  for r in range(num):
    n = int(out.lengths_B[r])
    ids = [int(t) for t in out.tokens_BxN[r, :n] if int(t) != eos_id]
    raw = sp.decode(ids)
    # `tokens`: every generated id (the final EOS or stop sequence included), so a later pass
    # (llm_eval/diagnose.py) can score the decode teacher-forced
    row = {"completion": truncate(raw, stop_strings), "raw": raw, "num_tokens": n,
           "tokens": [int(t) for t in out.tokens_BxN[r, :n]],
           "finish": generate.REASONS[int(out.reason_B[r])],
           "sum_p_eos": float(out.p_eos_BxN[r, :n].sum())}
    if composed:
      act = out.active_BxNxK[r, :n].astype(np.float64)
      row.update(
          sum_abs_log_z=float(np.abs(out.log_z_BxN[r, :n]).sum()),
          max_abs_log_z=float(np.abs(out.log_z_BxN[r, :n]).max(initial=0.0)),
          active_K=act.sum(axis=0).tolist(),            # tokens where expert k is active
          both_active_KxK=(act.T @ act).tolist(),       # tokens where k and j both are
          sum_p_eos_M=out.p_eos_BxNxM[r, :n].sum(axis=0).tolist())
    if drafts is not None:
      row.update(drafted=int(drafts[0][r]), accepted=int(drafts[1][r]))
    rows.append(row)
  return rows
