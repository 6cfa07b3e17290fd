"""Experiments 1-5 of the letter task: substitution, length, baselines, background, k experts
(and the baselines of each k: k_baselines).

Each returns table rows, one per seed and setting (registry.EXPERIMENTS lists them).
"""

from collections import defaultdict

import numpy as np

from compgen_jax.composition import arithmetic
from compgen_jax.letters import data, evaluate
from compgen_jax.letters.context import Ctx, diag_row, em_row, pair_lambdas, pairs, spec_row
from compgen_jax.lm.model import uniform_model


def substitution(ctx: Ctx) -> list[dict]:
  rows = []
  for subs in pairs(ctx.cfg):
    lam = pair_lambdas(ctx.cfg, len(subs))
    em, tokens, models, params = ctx.compose_em(ctx.p("identity"), subs, subs, lam)
    d = evaluate.diagnose(ctx.cfg, models, params, tokens, lam)
    example = _example(ctx, tokens, subs)
    strings = qualitative(ctx, models, params, lam)
    rows += [{"pair": ",".join(subs), "seed": s, **spec_row(ctx.cfg), **em_row(ctx, em, subs, s),
              **diag_row(d, s),
              "example": example if s == 0 else "", "qualitative": strings[s]}
             for s in range(ctx.cfg.num_seeds)]
  return rows


def qualitative(ctx: Ctx, models: tuple, params: tuple, lam) -> list[dict[str, str]]:
  """compose.qualitative (the authors' six strings) decoded by a composition, per seed:
  [{input: output}] (output '?' where the decoder wrote a non-letter)."""
  strings = list(ctx.cfg.compose.qualitative)
  if not strings:
    return [{} for _ in range(ctx.cfg.num_seeds)]
  n, s = max(map(len, strings)), ctx.cfg.num_seeds
  x = np.asarray([[data.SYMBOLS.index(c) for c in q.ljust(n)] for q in strings], np.int32)
  x_SxQxN = np.broadcast_to(x, (s, *x.shape))
  len_SxQ = np.broadcast_to(np.asarray([len(q) for q in strings], np.int32), (s, len(strings)))
  ref, forced, _ = evaluate.references(x_SxQxN, len_SxQ, data.table([]), ctx.cfg.data.layout)
  tokens = evaluate.decode_all(ctx.cfg, models, params, ref, forced, lam, ctx.keys)
  out = []
  for i in range(s):
    y = data.read_outputs(tokens[i], len_SxQ[i], ctx.cfg.data.layout)
    out.append({q: "".join(data.SYMBOLS[t] if t < len(data.SYMBOLS) else "?"
                           for t in y[j, :len(q)]) for j, q in enumerate(strings)})
  return out


def _example(ctx: Ctx, tokens, subs) -> str:
  """Input -> composed output for the first seed-0 test string containing every source letter."""
  srcs = [data.parse_sub(s)[0] for s in subs]
  x0 = np.asarray(ctx.x[0])
  hits = [i for i in range(x0.shape[0]) if all(src in x0[i, :int(ctx.len[0, i])] for src in srcs)]
  i = hits[0] if hits else 0
  n = int(ctx.len[0, i])
  out = data.read_outputs(tokens[0, i:i + 1], np.asarray([n]), ctx.cfg.data.layout)[0, :n]
  return f"{data.to_text(x0[i, :n])} -> {data.to_text(out)}"


def length(ctx: Ctx) -> list[dict]:
  """Exact match per length 1..length_max of each single model and the composition, and of the
  output letters alone (`letters_match`: the EOS step ignored, which the shifted layouts
  predict after a SEP at a position never seen in training)."""
  cfg, subs = ctx.cfg, pairs(ctx.cfg)[0]
  lengths = list(range(1, cfg.data.length_max + 1))
  x, ln = evaluate.test_inputs(cfg, ctx.keys, lengths, cfg.data.length_per_len, "length")
  entries = {"background": (ctx.p("identity"), []), **{s: (ctx.p(s), [s]) for s in subs},
             "joint": (ctx.p(data.joint_name(subs)), subs)}
  lam = pair_lambdas(cfg, len(subs))
  params = (ctx.p("identity"),) + tuple(ctx.p(s) for s in subs)
  entries["composition"] = (params, subs)
  rows = []
  for name, (p, t) in entries.items():
    p = p if isinstance(p, tuple) else (p,)
    em, tokens = evaluate.exact_match(cfg, (ctx.m,) * len(p), p, x, ln, data.table(t),
                                      lam if len(p) > 1 else None, ctx.keys)
    letters = _letters_match(ctx, tokens, x, ln, data.table(t))
    per_len, letters = (a.reshape(cfg.num_seeds, len(lengths), -1).mean(-1) for a in (em, letters))
    rows += [{"model": name, "length": n, "seed": s, "exact_match": per_len[s, j],
              "letters_match": letters[s, j]}
             for j, n in enumerate(lengths) for s in range(cfg.num_seeds)]
  return rows


def _letters_match(ctx: Ctx, tokens_SxBxT, x_SxBxN, len_SxB, table_V) -> np.ndarray:
  """[S, B]: every output letter right (whatever follows them)."""
  layout, out = ctx.cfg.data.layout, []
  want_SxBxN = np.take(table_V, np.asarray(x_SxBxN))
  for s in range(tokens_SxBxT.shape[0]):
    n_B = np.asarray(len_SxB[s])
    y = data.read_outputs(tokens_SxBxT[s], n_B, layout)
    in_len = np.arange(y.shape[1])[None] < n_B[:, None]
    out.append(np.all((y == want_SxBxN[s]) | ~in_len, axis=-1))
  return np.asarray(out, np.float32)


def length_table(rows: list[dict]) -> str:
  """Exact match per length (rows) and model (columns), mean over seeds."""
  models = list(dict.fromkeys(r["model"] for r in rows))
  lengths = sorted({r["length"] for r in rows})
  em = defaultdict(list)
  for r in rows:
    em[(r["model"], r["length"])].append(float(r["exact_match"]))
  lines = ["length | " + " | ".join(models)]
  lines += [f"{n} | " + " | ".join(f"{np.mean(em[(m, n)]):.3f}" for m in models)
            for n in lengths]
  return "\n".join(lines)


def baselines(ctx: Ctx) -> list[dict]:
  rows = []
  for subs in pairs(ctx.cfg):
    bg, experts = ctx.p("identity"), [ctx.p(s) for s in subs]
    methods = {"composition": ctx.compose_em(bg, subs, subs, pair_lambdas(
        ctx.cfg, len(subs)))[0],
               "joint": ctx.single_em(ctx.p(data.joint_name(subs)), subs),
               "weight_average": ctx.single_em(arithmetic.weight_average([bg] + experts), subs)}
    for lam in ctx.cfg.compose.ta_lambdas:
      methods[f"task_arithmetic_{lam:g}"] = ctx.single_em(
          arithmetic.task_arithmetic(bg, experts, lam), subs)
    for s, p in zip(subs, experts, strict=True):
      methods[f"expert_{s}"] = ctx.single_em(p, subs)
    methods["background"] = ctx.single_em(bg, subs)
    rows += [{"pair": ",".join(subs), "method": k, "init": ctx.cfg.init, "seed": s,
              **em_row(ctx, v, subs, s)}
             for k, v in methods.items() for s in range(ctx.cfg.num_seeds)]
  return rows


def background(ctx: Ctx) -> list[dict]:
  rows = []
  for subs in pairs(ctx.cfg):
    lam = pair_lambdas(ctx.cfg, len(subs))
    options = {"identity": (ctx.p("identity"), None),
               "mixture": (ctx.p(data.mixture_name(subs)), None),
               "uniform": (None, uniform_model(ctx.m))}
    for name, (bg, bg_model) in options.items():
      em, tokens, models, params = ctx.compose_em(bg, subs, subs, lam, bg_model)
      d = evaluate.diagnose(ctx.cfg, models, params, tokens, lam)
      rows += [{"pair": ",".join(subs), "background": name, "seed": s,
                **em_row(ctx, em, subs, s), **diag_row(d, s)}
               for s in range(ctx.cfg.num_seeds)]
  return rows


def k_subs(cfg) -> list[str]:
  """The first compose.k_max substitutions of compose.k_experts: k experts are the first k."""
  return data.parse_subs(cfg.compose.k_experts)[:cfg.compose.k_max]


def k_experts(ctx: Ctx) -> list[dict]:
  """k = 1..k_max disjoint experts; decoding pads unused slots with the background at weight 0
  (one compile), the diagnostics see only the k experts in use."""
  cfg = ctx.cfg
  subs_all = k_subs(cfg)
  bg, k_max, rows = ctx.p("identity"), len(subs_all), []
  models = (ctx.m,) * (1 + k_max)
  for k in range(1, k_max + 1):
    subs = subs_all[:k]
    params = (bg,) + tuple(ctx.p(s) for s in subs) + (bg,) * (k_max - k)
    lam = np.asarray([1.0] * k + [0.0] * (k_max - k), np.float32)
    em, _ = evaluate.exact_match(cfg, models, params, ctx.x, ctx.len, data.table(subs), lam,
                                 ctx.keys)
    ref = evaluate.references(ctx.x, ctx.len, data.table(subs), cfg.data.layout)[0]
    d = evaluate.diagnose(cfg, models[:k + 1], params[:k + 1], ref, lam[:k])
    rows += [{"k": k, "experts": ",".join(subs), "seed": s, **spec_row(cfg),
              **em_row(ctx, em, subs, s),
              **diag_row(d, s), "p_eos_at_eos": d["p_eos_at_eos"][s],
              "max_p_eos_elsewhere": d["max_p_eos_elsewhere"][s]}
             for s in range(cfg.num_seeds)]
  return rows


def k_baselines(ctx: Ctx) -> list[dict]:
  """For k = 1..k_max (k_experts' experts; their composition is k_experts' rows): what else the
  same models make of the k substitutions: one model trained on all k (`joint`; at k = 1 the
  expert itself), the background's and the k experts' weights averaged, and the background plus
  lambda x the sum of their task vectors for each compose.ta_lambdas; exact match on the k."""
  cfg, bg, rows = ctx.cfg, ctx.p("identity"), []
  for k in range(1, len(k_subs(cfg)) + 1):
    subs = k_subs(cfg)[:k]
    experts = [ctx.p(s) for s in subs]
    methods = {"joint": ctx.single_em(ctx.p(data.joint_name(subs)), subs),
               "weight_average": ctx.single_em(arithmetic.weight_average([bg] + experts), subs)}
    for lam in cfg.compose.ta_lambdas:
      methods[f"task_arithmetic_{lam:g}"] = ctx.single_em(
          arithmetic.task_arithmetic(bg, experts, lam), subs)
    rows += [{"k": k, "experts": ",".join(subs), "method": m, "init": cfg.init, "seed": s,
              **em_row(ctx, em, subs, s)}
             for m, em in methods.items() for s in range(cfg.num_seeds)]
  return rows
