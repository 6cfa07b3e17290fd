"""Does logit composition keep each member's skill where its assumption holds? (issue 55's
registered question, results/cpu/REGISTRATION.md.) The operator p_b * prod p_i / p_b is right
on a member's skill when every other member equals the background there; the drift stage
measures how far they are (llm_study/drift.py), the score stages how much of the member's
accuracy the composition keeps.

For each recipe, composition, member skill and seed (the member's benchmark is its skill's):
  retention   the composition's accuracy on the skill / the member expert's own
  others_kl   the mean over the composition's other members of their KL(p_m || p_b) on the
              skill's problems (drift.jsonl: expert m, set <skill>)
Retention's interval resamples the seeds and the problems (the crossed bootstrap of
llm_eval/comparisons.py) of the ratio of the two accuracies. The rule (REGISTRATION.md):
  ranks      the Pearson r of the ranks of retention and others_kl over every point whose expert
             solves at least MIN_EXPERT of its skill, its interval from resampling whole
             (recipe, seed) clusters (analysis/correlations.clustered)
  closest    per (composition, skill), the recipe whose experts drift least off their skill
             (mean off-skill KL) against the drifted end (FULL): the difference of retention
Support: r's interval below 0 and `closest` above FULL (interval above 0) on at least half the
(composition, skill) pairs; refutation: r's interval above 0, or `closest` below FULL on at
least half; else not told apart.

WORKDIR/retention_<split>/retention.jsonl, report.md, retention.png
"""

import math
import os

import matplotlib
import numpy as np

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # noqa: E402

from compgen_jax import files, metric_writer  # noqa: E402
from compgen_jax.analysis import correlations, figures, markdown  # noqa: E402
from compgen_jax.llm_eval import comparisons, systems  # noqa: E402
from compgen_jax.llm_study import drift, layout, recipes  # noqa: E402

FULL = "full"  # the drifted end: every parameter on the skill's answers alone
MIN_EXPERT = 0.1  # an expert below this on its own skill has no skill to retain
ROWS_FILE, REPORT_FILE, FIGURE_FILE = "retention.jsonl", "report.md", "retention.png"
SUPPORTED, REFUTED, NOT_TOLD = "supported", "refuted", "not told apart"


def out_dir(workdir: str, split: str) -> str:
  return os.path.join(workdir, f"retention_{split}")


def _ratio_draws(pairs: list[tuple[np.ndarray, np.ndarray]], rng) -> np.ndarray:
  """Bootstrap draws [len(pairs), draws] of mean(c) / mean(e) for each (c, e) of outcomes
  [seeds, problems], all resampled with the same seed and problem counts (the crossed
  bootstrap; the same problems, so differences between them are paired)."""
  num_s, num_p = pairs[0][0].shape
  w_s = correlations.resample_counts(num_s, rng).astype(np.float64)
  w_p = correlations.resample_counts(num_p, rng).astype(np.float64)
  out = []
  for c, e in pairs:
    num = np.einsum("ds,sp,dp->d", w_s, c, w_p)
    den = np.einsum("ds,sp,dp->d", w_s, e, w_p)
    with np.errstate(invalid="ignore", divide="ignore"):
      out.append(num / den)
  return np.stack(out)


def _interval(draws: np.ndarray) -> tuple[float, float]:
  """The percentile interval of the finite draws (NaN ends when half of them are not)."""
  ok = draws[np.isfinite(draws)]
  return correlations.percentile_interval(ok) if ok.size > draws.size // 2 else (
      math.nan, math.nan)


def compositions(cfg) -> dict[str, tuple[str, ...]]:
  """{composition scored: its member experts' skills} (skills with a benchmark of their name)."""
  out = {}
  for s in systems.resolve(cfg.score):
    if s.kind == "composed" and s.name in cfg.score.systems:
      skills = tuple(m for m in s.members[1:] if m in cfg.experts)
      if skills:
        out[s.name] = skills
  return out


def collect(cfg, workdir: str, split: str) -> tuple[list[dict], dict]:
  """(rows, outcomes): a row per (recipe, composition, member skill, seed), and one per
  (recipe, composition, skill) pooled over seeds (seed "all": retention of the pooled
  accuracies, its interval); outcomes {(recipe, composition, skill): (composed, expert)
  [seeds, problems]}."""
  out, outcomes = [], {}
  for recipe in recipes.names(cfg):
    scored = comparisons.scores(comparisons.read(layout.score_dir(workdir, split, 0, recipe)))
    drifts = metric_writer.read_rows(os.path.join(recipes.root(workdir, recipe), layout.DRIFT,
                                                  drift.ROWS_FILE))
    kl = {(r["expert"], r["seed"], r["set"]): r["kl"] for r in drifts}
    off = {(s["expert"], s["seed"]): s["off_kl"] for s in drift.summary(drifts)}
    for name, skills in compositions(cfg).items():
      for skill in skills:
        if (skill, name) not in scored or (skill, skill) not in scored:
          continue
        c, e = comparisons.paired(scored[skill, name], scored[skill, skill], f"{name} on {skill}")
        seeds = scored[skill, skill].seeds
        others = [m for m in skills if m != skill]
        for i, seed in enumerate(seeds):
          acc_c, acc_e = float(c[i].mean()), float(e[i].mean())
          out.append(dict(
              recipe=recipe, composition=name, skill=skill, seed=seed, composed=acc_c,
              expert=acc_e, retention=acc_c / acc_e if acc_e else math.nan,
              # NaN where the drift stage did not measure this seed (a study scored further)
              others_kl=float(np.mean([kl.get((m, seed, skill), math.nan) for m in others]))
              if others else math.nan, expert_off_kl=off.get((skill, seed), math.nan)))
        outcomes[recipe, name, skill] = (c, e)
        low, high = _interval(_ratio_draws(
            [(c, e)], np.random.default_rng(correlations.BOOTSTRAP_SEED))[0])
        acc_e = float(e.mean())
        out.append(dict(recipe=recipe, composition=name, skill=skill, seed="all",
                        composed=float(c.mean()), expert=acc_e,
                        retention=float(c.mean()) / acc_e if acc_e else math.nan,
                        low=low, high=high, seeds=len(seeds), problems=c.shape[1]))
  return out, outcomes


def judge(rows: list[dict], outcomes: dict) -> dict:
  """The registered rule's parts and verdict (module docstring) from collect's output."""
  points = [r for r in rows if r["seed"] != "all" and r["expert"] >= MIN_EXPERT
            and math.isfinite(r["others_kl"])]
  rank = lambda v: np.argsort(np.argsort(v)).astype(np.float64)  # noqa: E731
  r = correlations.clustered(rank([p["retention"] for p in points]),
                             rank([p["others_kl"] for p in points]),
                             [f"{p['recipe']}/{p['seed']}" for p in points]) if points else None
  pooled = {(x["recipe"], x["composition"], x["skill"]): x for x in rows if x["seed"] == "all"}
  off = {}
  for x in rows:
    if x["seed"] != "all":
      off.setdefault(x["recipe"], {})[x["skill"], x["seed"]] = x["expert_off_kl"]
  closest = min(off, key=lambda k: np.nanmean(list(off[k].values()))) if off else None
  pairs = []
  for (recipe, name, skill), full in pooled.items():
    if recipe != FULL or closest in (None, FULL) or (closest, name, skill) not in pooled:
      continue
    near = pooled[closest, name, skill]
    if min(full["expert"], near["expert"]) < MIN_EXPERT:
      continue
    a, b = _ratio_draws([outcomes[closest, name, skill], outcomes[FULL, name, skill]],
                        np.random.default_rng(correlations.BOOTSTRAP_SEED))
    low, high = _interval(a - b)
    pairs.append(dict(composition=name, skill=skill, closest=closest,
                      difference=near["retention"] - full["retention"], low=low, high=high,
                      above=low > 0, below=high < 0))
  half = len(pairs) / 2
  above, below = sum(p["above"] for p in pairs), sum(p["below"] for p in pairs)
  told = r is not None and math.isfinite(r.low)
  verdict = (SUPPORTED if told and r.high < 0 and pairs and above >= half else
             REFUTED if (told and r.low > 0) or (pairs and below >= half) else NOT_TOLD)
  return dict(correlation=r, closest=closest, pairs=pairs, verdict=verdict, points=len(points))


def figure(rows: list[dict], path: str) -> str:
  """Retention against the other members' KL on the skill, a point per (recipe, composition,
  skill, seed), coloured by recipe."""
  fig, ax = plt.subplots(figsize=(5.5, 4))
  points = [r for r in rows if r["seed"] != "all" and math.isfinite(r["others_kl"])]
  markers = dict(zip(sorted({p["composition"] for p in points}), "os^Dv<>", strict=False))
  for recipe in dict.fromkeys(p["recipe"] for p in points):
    for name, marker in markers.items():
      mine = [p for p in points if p["recipe"] == recipe and p["composition"] == name]
      if mine:
        ax.scatter([p["others_kl"] for p in mine], [p["retention"] for p in mine], s=22,
                   marker=marker, label=f"{recipe or 'experts'}, {name}",
                   color=f"C{list(dict.fromkeys(q['recipe'] for q in points)).index(recipe)}")
  ax.axhline(1.0, color="black", lw=0.8, ls=":")  # the member's own accuracy
  ax.set_xscale("symlog", linthresh=0.01)
  ax.set_xlabel("other members' KL(p_m || p_b) on the skill's problems (nats/token)")
  ax.set_ylabel("retention: composed / expert accuracy")
  ax.legend(fontsize=6)
  ax.grid(alpha=0.3)
  return figures.save(fig, path)


def _cell(x: float) -> str:
  return "-" if not math.isfinite(x) else f"{x:.2f}"


def report(rows: list[dict], judged: dict, split: str) -> str:
  """The table of pooled retention, the drift beside it, the rule's parts and verdict."""
  pooled = [r for r in rows if r["seed"] == "all"]
  per_seed = [r for r in rows if r["seed"] != "all"]
  drifts = {}
  for r in per_seed:
    drifts.setdefault(r["recipe"], {})[r["skill"], r["seed"]] = r["expert_off_kl"]
  table = markdown.table(
      ["recipe", "composition", "skill", "expert", "composed", "retention [95%]",
       "seeds x problems", "others' KL", "recipe's mean off-skill KL"],
      [[r["recipe"] or "-", r["composition"], r["skill"], f"{100 * r['expert']:.1f}",
        f"{100 * r['composed']:.1f}", f"{_cell(r['retention'])} [{_cell(r['low'])}, "
        f"{_cell(r['high'])}]", f"{r['seeds']} x {r['problems']}",
        _cell(float(np.nanmean([p["others_kl"] for p in per_seed if (
            p["recipe"], p["composition"], p["skill"]) == (r["recipe"], r["composition"],
                                                           r["skill"])]))),
        _cell(float(np.nanmean(list(drifts[r["recipe"]].values()))))] for r in pooled])
  c = judged["correlation"]
  rank_text = ("no point with an expert above the bar" if c is None else
               f"r = {_cell(c.r)} [{_cell(c.low)}, {_cell(c.high)}] over {c.n} points in "
               f"{c.clusters} (recipe, seed) clusters" + (
                   f" (no interval: fewer than {correlations.MIN_CLUSTERS} clusters)"
                   if not math.isfinite(c.low) else ""))
  pairs = markdown.table(
      ["composition", "skill", "closest recipe", "retention difference against full [95%]"],
      [[p["composition"], p["skill"], p["closest"], f"{_cell(p['difference'])} "
        f"[{_cell(p['low'])}, {_cell(p['high'])}]"] for p in judged["pairs"]]
  ) if judged["pairs"] else "no (composition, skill) pair to compare (needs the full recipe and " \
      "another, each expert at or above the bar)"
  return "\n".join([
      f"# Retention against drift ({split} split)", "",
      "Retention is a composition's accuracy on a member's skill over that member expert's "
      "own (llm_study/retention.py); others' KL the mean over the composition's other members "
      "of their KL from the background on that skill's problems (the drift stage's rows). The "
      "factorization assumption predicts high retention where the others' KL is small. "
      f"Points with an expert below {MIN_EXPERT:.0%} on its skill are left out of the rule.", "",
      table, "", markdown.figure(FIGURE_FILE, "retention against the other members' KL"),
      "## The registered rule", "",
      f"- rank correlation of retention with others' KL: {rank_text}",
      f"- the closest recipe (lowest mean off-skill KL): {judged['closest'] or '-'}", "",
      pairs, "", f"**Verdict: {judged['verdict']}** (results/cpu/REGISTRATION.md, issue 55).",
      ""])


def write(cfg, workdir: str, split: str) -> str:
  """retention_<split>/: the rows, the figure and the report; returns the report's path."""
  rows, outcomes = collect(cfg, workdir, split)
  where = out_dir(workdir, split)
  os.makedirs(where, exist_ok=True)
  files.write_jsonl(os.path.join(where, ROWS_FILE), rows)
  figure(rows, os.path.join(where, FIGURE_FILE))
  return files.write_text(os.path.join(where, REPORT_FILE), report(rows, judge(rows, outcomes),
                                                                   split))
