"""Experiments 6 and 7: violations of factorization (overlapping and chained experts), and the
task-arithmetic equivalence for experts that fine-tune only the head on frozen features."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from compgen_jax.composition import arithmetic
from compgen_jax.composition.compose import compose
from compgen_jax.composition.decode import teacher_forced_logps
from compgen_jax.composition.diagnostics import total_variation
from compgen_jax.letters import data, evaluate
from compgen_jax.letters.context import Ctx, diag_row, em_row, pairs


def readings(subs: list[str]) -> dict[str, np.ndarray | None]:
  """Tables of each reading of 'apply both' for two experts: parallel (one table; None, i.e.
  undefined, when both rewrite the same letter), each expert alone, and sequential (the
  first, then the second)."""
  t1, t2 = data.table(subs[:1]), data.table(subs[1:])
  return {"parallel": None if data.conflicting(subs) else data.table(subs),
          f"only_{subs[0]}": t1, f"only_{subs[1]}": t2, "sequential": t2[t1]}


def violations(ctx: Ctx) -> list[dict]:
  """Disjoint pair (reference), overlapping experts and chained experts, with diagnostics.

  Success is scored against every reading of 'apply both' (`readings`); the parallel reading of
  overlapping experts is undefined: exact_match_parallel is NaN and parallel_defined False.
  """
  cfg, c = ctx.cfg, ctx.cfg.compose
  cases = {"disjoint": pairs(cfg)[0], "overlap": list(c.overlap), "chain": list(c.chain)}
  rows = []
  for case, subs in cases.items():
    tokens, models, params = ctx.compose_tokens(ctx.p("identity"), subs)
    d = evaluate.diagnose(cfg, models, params, tokens)
    nan = np.full(tokens.shape[:2], np.nan, np.float32)
    ems = {k: nan if t is None else ctx.score(tokens, t) for k, t in readings(subs).items()}
    fracs = _outcomes(ctx, tokens, subs)
    for s in range(cfg.num_seeds):
      row = {"case": case, "experts": ",".join(subs), "seed": s, **diag_row(d, s),
             "parallel_defined": not data.conflicting(subs)}
      for k, v in ems.items():
        row.update(em_row(ctx, v, subs, s, f"exact_match_{k}"))
      row.update({f"outcome_{k}": v[s] for k, v in fracs.items()})
      row["flag_overlap"] = bool(row["overlap"] > c.overlap_tol)
      row["flag_ortho"] = bool(row["ortho_cos"] > c.ortho_cos_tol)
      rows.append(row)
  return rows


def _outcomes(ctx: Ctx, tokens, subs) -> dict[str, np.ndarray]:
  """Where the input is the first expert's source letter: fraction of outputs per letter."""
  src, dst1 = data.parse_sub(subs[0])
  src2, dst2 = data.parse_sub(subs[1])
  out = {}
  for s in range(tokens.shape[0]):
    y = data.read_outputs(tokens[s], np.asarray(ctx.len[s]), ctx.cfg.data.layout)
    x = np.asarray(ctx.x[s])
    at = (x == src) & (np.arange(x.shape[1])[None] < np.asarray(ctx.len[s])[:, None])
    vals = y[at]
    named = {"src": src, "dst1": dst1, "dst2": dst2 if src2 == src else readings(subs)[
        "sequential"][src]}
    for k, v in named.items():
      out.setdefault(k, []).append(np.mean(vals == v) if vals.size else np.nan)
  return {k: np.asarray(v) for k, v in out.items()}


@functools.cache
def _gap_fn(model):
  def one_seed(params_b, params_1, params_2, tokens_BxT, valid_BxT):
    ta = arithmetic.task_arithmetic(params_b, [params_1, params_2], 1.0)
    logp = teacher_forced_logps((model,) * 4, (params_b, params_1, params_2, ta), tokens_BxT)
    logp_c, _ = compose(logp[0], logp[1:3])
    diff = jnp.max(jnp.abs(logp_c - logp[3]), axis=-1)
    tv = total_variation(logp_c, logp[3])
    w = valid_BxT.astype(jnp.float32)
    return {"max_abs_logp_diff": jnp.max(diff * w), "mean_tv": jnp.sum(tv * w) / w.sum(),
            "max_tv": jnp.max(tv * w)}
  return jax.jit(jax.vmap(one_seed))


def arithmetic_equivalence(ctx: Ctx) -> list[dict]:
  """Task arithmetic (lambda 1) vs logit composition for fine-tuned experts, per regime."""
  cfg, subs = ctx.cfg, pairs(ctx.cfg)[0]
  bg = ctx.p("identity")
  ref, forced, target = evaluate.references(ctx.x, ctx.len, data.table(subs), cfg.data.layout)
  ref, target = ref[:, :cfg.compose.eval_batch], target[:, :cfg.compose.eval_batch]
  valid = jnp.concatenate([target[..., 1:], jnp.zeros_like(target[..., :1])], axis=-1)
  rows = []
  for regime in cfg.finetune.regimes:
    e1, e2 = (ctx.zoo.finetuned[(s, regime)] for s in subs)
    gap = jax.device_get(_gap_fn(ctx.m)(bg, e1, e2, ref, valid))
    ta = arithmetic.task_arithmetic(bg, [e1, e2], 1.0)
    em_ta = ctx.single_em(ta, subs)
    em_c = evaluate.exact_match(cfg, (ctx.m,) * 3, (bg, e1, e2), ctx.x, ctx.len,
                                data.table(subs), None, ctx.keys)[0]
    own = [ctx.single_em(e, [s]) for e, s in ((e1, subs[0]), (e2, subs[1]))]
    for s in range(cfg.num_seeds):
      rows.append({"regime": regime, "seed": s, **{k: v[s] for k, v in gap.items()},
                   **em_row(ctx, em_ta, subs, s, "exact_match_task_arithmetic"),
                   **em_row(ctx, em_c, subs, s, "exact_match_composition"),
                   "exact_match_expert1_own": own[0][s].mean(),
                   "exact_match_expert2_own": own[1][s].mean()})
  return rows
