"""Experiments 1-5 of the letter task: substitution, length, baselines, background, k experts.

Each returns table rows, one per seed and setting; `runner.run` writes them and plots them.
"""

import numpy as np

from compgen_jax.composition import arithmetic, evaluate, letters, suite
from compgen_jax.composition.diagnostics import offdiag_max
from compgen_jax.composition.lm import uniform_model


class Ctx:
  """What every experiment reads: config, trained models and the held-out test set."""

  def __init__(self, cfg, zoo: suite.Zoo):
    self.cfg, self.zoo, self.m = cfg, zoo, zoo.model
    self.keys = zoo.seed_keys
    self.x, self.len = evaluate.test_inputs(cfg, zoo.seed_keys, [cfg.data.train_len],
                                            cfg.data.test_size, "main")

  def p(self, task: str):
    return self.zoo.params[task]

  def compose_tokens(self, background, experts: list[str], lam=None, bg_model=None):
    """Decoded tokens [S, B, T] of experts composed over a background, with models, params."""
    models = (bg_model or self.m,) + (self.m,) * len(experts)
    params = (background,) + tuple(self.p(e) for e in experts)
    # forced positions (BOS, input letters, SEP) do not depend on the target table
    ref, forced, _ = evaluate.references(self.x, self.len, letters.table([]),
                                         self.cfg.data.layout)
    tokens = evaluate.decode_all(self.cfg, models, params, ref, forced, lam, self.keys)
    return tokens, models, params

  def score(self, tokens, table_V) -> np.ndarray:
    """Exact match [S, B] of decoded tokens against `table_V` applied to the test strings."""
    ref = evaluate.references(self.x, self.len, table_V, self.cfg.data.layout)[0]
    return np.all(tokens == np.asarray(ref), axis=-1).astype(np.float32)

  def compose_em(self, background, experts: list[str], target_subs: list[str], lam=None,
                 bg_model=None):
    """Exact match [S, B] and decoded tokens of experts composed over a background."""
    tokens, models, params = self.compose_tokens(background, experts, lam, bg_model)
    return self.score(tokens, letters.table(target_subs)), tokens, models, params

  def single_em(self, params, target_subs: list[str], x=None, ln=None):
    x, ln = (self.x, self.len) if x is None else (x, ln)
    return evaluate.exact_match(self.cfg, (self.m,), (params,), x, ln,
                                letters.table(target_subs), None, self.keys)[0]

  def all_sources(self, subs: list[str]) -> np.ndarray:
    """[S, B]: test strings containing every source letter of `subs`."""
    return letters.contains_all_sources(self.x, self.len, subs)


def em_row(ctx: Ctx, em_SxB: np.ndarray, subs: list[str], s: int, prefix: str = "exact_match"):
  """Exact match of seed s over all strings and over the strings containing every source
  letter (where every substitution has to act), with that subset's size."""
  mask = ctx.all_sources(subs)
  return {prefix: em_SxB[s].mean(), f"{prefix}_all_sources": evaluate.mean_where(em_SxB, mask)[s],
          "num_all_sources": int(mask[s].sum())}


def _diag_row(d: dict, s: int) -> dict:
  return {"mean_abs_log_z": d["mean_abs_log_z"][s], "max_abs_log_z": d["max_abs_log_z"][s],
          "overlap": offdiag_max(d["overlap_KxK"][s]), "ortho": offdiag_max(d["ortho_KxK"][s]),
          "ortho_cos": offdiag_max(d["ortho_cos_KxK"][s]), "tv_mask": d["tv_mask_K"][s],
          "tv_background": d["tv_background"][s], "active_frac": d["active_frac_K"][s]}


def substitution(ctx: Ctx) -> list[dict]:
  rows = []
  for subs in suite.pairs(ctx.cfg):
    lam = suite.pair_lambdas(ctx.cfg, len(subs))
    em, tokens, models, params = ctx.compose_em(ctx.p("identity"), subs, subs, lam)
    d = evaluate.diagnose(ctx.cfg, models, params, tokens, lam)
    example = _example(ctx, tokens, subs)
    rows += [{"pair": ",".join(subs), "seed": s, **em_row(ctx, em, subs, s), **_diag_row(d, s),
              "example": example if s == 0 else ""} for s in range(ctx.cfg.num_seeds)]
  return rows


def _example(ctx: Ctx, tokens, subs) -> str:
  """Input -> composed output for the first seed-0 test string containing every source letter."""
  srcs = [letters.parse_sub(s)[0] for s in subs]
  x0 = np.asarray(ctx.x[0])
  hits = [i for i in range(x0.shape[0]) if all(src in x0[i, :int(ctx.len[0, i])] for src in srcs)]
  i = hits[0] if hits else 0
  n = int(ctx.len[0, i])
  out = _outputs(tokens[0, i:i + 1], np.asarray([n]), ctx.cfg.data.layout)[0, :n]
  return f"{letters.to_text(x0[i, :n])} -> {letters.to_text(out)}"


def _outputs(tokens_BxT, len_B, layout: str) -> np.ndarray:
  """The output letters y [B, N] read back from decoded sequences."""
  n = (tokens_BxT.shape[-1] - 3) // 2
  i_N = np.arange(n)
  pos_BxN = (2 * i_N + 2)[None] if layout == "aligned" else len_B[:, None] + 2 + i_N[None]
  return np.take_along_axis(tokens_BxT, np.broadcast_to(pos_BxN, (len(len_B), n)), axis=-1)


def length(ctx: Ctx) -> list[dict]:
  cfg, subs = ctx.cfg, suite.pairs(ctx.cfg)[0]
  lengths = list(range(1, cfg.data.length_max + 1))
  x, ln = evaluate.test_inputs(cfg, ctx.keys, lengths, cfg.data.length_per_len, "length")
  entries = {"background": (ctx.p("identity"), []), **{s: (ctx.p(s), [s]) for s in subs},
             "joint": (ctx.p(letters.joint_name(subs)), subs)}
  ems = {name: ctx.single_em(p, t, x, ln) for name, (p, t) in entries.items()}
  lam = suite.pair_lambdas(cfg, len(subs))
  models = (ctx.m,) * (1 + len(subs))
  params = (ctx.p("identity"),) + tuple(ctx.p(s) for s in subs)
  ems["composition"] = evaluate.exact_match(cfg, models, params, x, ln, letters.table(subs), lam,
                                            ctx.keys)[0]
  rows = []
  for name, em in ems.items():
    per_len = em.reshape(cfg.num_seeds, len(lengths), -1).mean(-1)
    rows += [{"model": name, "length": n, "seed": s, "exact_match": per_len[s, j]}
             for j, n in enumerate(lengths) for s in range(cfg.num_seeds)]
  return rows


def baselines(ctx: Ctx) -> list[dict]:
  rows = []
  for subs in suite.pairs(ctx.cfg):
    bg, experts = ctx.p("identity"), [ctx.p(s) for s in subs]
    methods = {"composition": ctx.compose_em(bg, subs, subs, suite.pair_lambdas(
        ctx.cfg, len(subs)))[0],
               "joint": ctx.single_em(ctx.p(letters.joint_name(subs)), subs),
               "weight_average": ctx.single_em(arithmetic.weight_average([bg] + experts), subs)}
    for lam in suite.floats(ctx.cfg.compose.ta_lambdas):
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
  for subs in suite.pairs(ctx.cfg):
    lam = suite.pair_lambdas(ctx.cfg, len(subs))
    options = {"identity": (ctx.p("identity"), None),
               "mixture": (ctx.p(letters.mixture_name(subs)), None),
               "uniform": (None, uniform_model(letters.VOCAB_SIZE))}
    for name, (bg, bg_model) in options.items():
      em, tokens, models, params = ctx.compose_em(bg, subs, subs, lam, bg_model)
      d = evaluate.diagnose(ctx.cfg, models, params, tokens, lam)
      rows += [{"pair": ",".join(subs), "background": name, "seed": s,
                **em_row(ctx, em, subs, s), **_diag_row(d, s)}
               for s in range(ctx.cfg.num_seeds)]
  return rows


def k_experts(ctx: Ctx) -> list[dict]:
  """k = 1..k_max disjoint experts; decoding pads unused slots with the background at weight 0
  (one compile), the diagnostics see only the k experts in use."""
  cfg = ctx.cfg
  subs_all = letters.parse_subs(cfg.compose.k_experts)[:cfg.compose.k_max]
  bg, k_max, rows = ctx.p("identity"), len(subs_all), []
  models = (ctx.m,) * (1 + k_max)
  for k in range(1, k_max + 1):
    subs = subs_all[:k]
    params = (bg,) + tuple(ctx.p(s) for s in subs) + (bg,) * (k_max - k)
    lam = np.asarray([1.0] * k + [0.0] * (k_max - k), np.float32)
    em, _ = evaluate.exact_match(cfg, models, params, ctx.x, ctx.len, letters.table(subs), lam,
                                 ctx.keys)
    ref = evaluate.references(ctx.x, ctx.len, letters.table(subs), cfg.data.layout)[0]
    d = evaluate.diagnose(cfg, models[:k + 1], params[:k + 1], ref, lam[:k])
    rows += [{"k": k, "experts": ",".join(subs), "seed": s, **em_row(ctx, em, subs, s),
              **_diag_row(d, s), "p_eos_at_eos": d["p_eos_at_eos"][s],
              "max_p_eos_elsewhere": d["max_p_eos_elsewhere"][s]}
             for s in range(cfg.num_seeds)]
  return rows
