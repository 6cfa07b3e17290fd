"""The evaluate pass's per-problem rows (llm_eval/diagnose.py) summarized per benchmark and
composition, over one seed's experts or pooled over several (issue 38, items 4 and 5):

  summarize   the per-problem quantities pooled over every generated token of every row (maxima
              as maxima), counts over the rows: one per (seed, problem)
  predictors  each quantity of PREDICTORS's AUC for failure over the (seed, problem) rows, its
              bootstrap interval resampling PROBLEMS as clusters (analysis.correlations.auc):
              a problem is drawn with all its seeds' rows, because the seeds' decodes of one
              problem share its difficulty and are not independent. With one seed each problem
              is its own cluster: the bootstrap over problems, draw for draw; with its
              two-sided bootstrap p-value of AUC = 0.5 from the same draws
  verdicts    per benchmark and composition, whether some quantity predicts failure (RULE)

A row without a `seed` is seed 0's (the pass's own rows of one workdir); with several seeds each
output row also says `seeds` and `problems` (distinct problems), and every seed must have
diagnosed the same problems of a composition (crossed, as comparisons.scores requires).
`read` gathers the rows of every seed scored in a workdir (comparisons.seeds_of), each tagged
with its seed; the llm report pools them (report.read).
"""

import math
import os

import numpy as np

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import correlations
from compgen_jax.analysis import verdicts as rules
from compgen_jax.composition import diagnostics
from compgen_jax.llm_eval import comparisons
from compgen_jax.types import DataError

# The pre-scoring quantities tested as predictors of failure, per problem (fixed before any
# run): |log Z_t| mean and max, the experts' mean active fraction and largest pairwise
# both-active fraction, mean KL(p_i || p_b), tail boost mean and max, unranked picks and mass,
# the completion's length and whether it ran to the token budget.
PREDICTORS = ("mean_abs_log_z", "max_abs_log_z", "active_frac", "overlap", "mean_kl",
              "mean_tail_boost", "max_tail_boost", "unranked_pick_frac", "mean_unranked_mass",
              "num_tokens", "hits_budget")
RULE = (f"a composition's quantities predict failure on a benchmark (yes) when at least one "
        f"quantity's interval excludes 0.5 and survives Holm's step-down correction over the "
        f"benchmark-composition's testable quantities at family-wise {1 - rules.LEVEL:.2f} "
        f"(each with its two-sided bootstrap p-value of AUC = 0.5 from the interval's own "
        f"draws); else no, which is not a claim that the quantities carry no information about "
        f"failure, only that none is told apart from chance here; not testable when no "
        f"quantity is")
_POOLED = ("mean_abs_log_z", "mean_tail_boost", "unranked_pick_frac", "mean_unranked_mass")


def read(workdir: str) -> list[dict]:
  """The pass's per-problem rows of every seed scored in `workdir` that it has diagnosed
  (seed s's in WORKDIR/seed_<s>/), each with its `seed`; [] when it has diagnosed none."""
  return [{**r, "seed": seed} for seed in comparisons.seeds_of(workdir)
          for r in metric_writer.read_rows(os.path.join(comparisons.seed_dir(workdir, seed),
                                                        workdir_lib.DIAGNOSTICS_FILE))]


def groups(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
  """The rows per (benchmark, composition), in the rows' order; DataError when a problem repeats
  at a seed or the seeds diagnosed different problems (comparisons.scores' check of the crossed
  design)."""
  comparisons.scores([{"benchmark": r["benchmark"], "system": r["system"],
                       "seed": r.get("seed", 0), "id": str(r["id"]), "correct": r["correct"]}
                      for r in rows], verb="diagnosed")
  out: dict[tuple[str, str], list[dict]] = {}
  for r in rows:
    out.setdefault((r["benchmark"], r["system"]), []).append(r)
  return out


def _counted(group: list[dict]) -> dict:
  """{} for one seed's rows, else how many seeds and distinct problems they pool."""
  seeds = {r.get("seed", 0) for r in group}
  return {} if len(seeds) == 1 else {"seeds": len(seeds),
                                     "problems": len({str(r["id"]) for r in group})}


def _pooled(group: list[dict], field: str) -> np.ndarray:
  """A per-problem field's mean over every generated token of the group."""
  w = np.asarray([r["num_tokens"] for r in group], np.float64)
  return np.einsum("p,p...->...", w, np.asarray([r[field] for r in group])) / w.sum()


def summarize(rows: list[dict]) -> list[dict]:
  """Per benchmark and composition: the per-problem quantities pooled over generated tokens
  (maxima as maxima), and at the EOS that ends a sequence, the fraction of those sequences in
  which each model ranks EOS first, and in which none does."""
  out = []
  for key, group in groups(rows).items():
    ends = np.asarray([r["eos_first_M"] for r in group if r["eos_first_M"] is not None], bool)
    out.append({
        "step": 0, "benchmark": key[0], "system": key[1], "members": group[0]["members"],
        "num_problems": len(group), "num_correct": sum(r["correct"] for r in group),
        "finish_eos": len(ends), "finish_budget": int(sum(r["hits_budget"] for r in group)),
        "mean_tokens": float(np.mean([r["num_tokens"] for r in group])),
        "active_frac_K": _pooled(group, "active_frac_K").tolist(),
        "overlap": float(diagnostics.offdiag_max(_pooled(group, "overlap_KxK"))),
        **{f: float(_pooled(group, f)) for f in _POOLED},
        "max_abs_log_z": max(r["max_abs_log_z"] for r in group),
        "max_tail_boost": max(r["max_tail_boost"] for r in group),
        "eos_first_frac_M": ends.mean(axis=0).tolist() if len(ends) else None,
        "eos_first_none": float((~ends.any(axis=1)).mean()) if len(ends) else None,
        "decode_log_z_gap": max(r["decode_log_z_gap"] for r in group),
        "decode_active_gap": sum(r["decode_active_gap"] for r in group),
        **_counted(group)})
  return out


def predictors(rows: list[dict]) -> list[dict]:
  """Per benchmark, composition and quantity of PREDICTORS: its AUC for failure (the chance a
  failed row's value exceeds a solved one's), with the bootstrap interval over problems (each
  drawn with all its seeds)."""
  out = []
  for key, group in groups(rows).items():
    failed = [not r["correct"] for r in group]
    problem = [str(r["id"]) for r in group]
    for q in PREDICTORS:
      a = correlations.auc([float(r[q]) for r in group], failed, clusters=problem)
      out.append({"step": 0, "benchmark": key[0], "system": key[1], "quantity": q,
                  "auc": a.auc, "low": a.low, "high": a.high, "p": a.p, "failures": a.positives,
                  "successes": a.negatives,
                  "text": correlations.auc_text(a, "failures", "successes"),
                  **_counted(group)})
  return out


def excludes_half(row: dict) -> bool:
  """A predictor row's interval excludes 0.5 (False when not testable: NaN, or "nan" as
  metric_writer reads a NaN back)."""
  return float(row["low"]) > 0.5 or float(row["high"]) < 0.5


def cells(preds: list[dict]) -> dict[tuple[str, str], list[dict]]:
  """`predictors`' rows grouped by (benchmark, composition), in the order they give them."""
  out: dict[tuple[str, str], list[dict]] = {}
  for r in preds:
    out.setdefault((r["benchmark"], r["system"]), []).append(r)
  return out


def verdicts(preds: list[dict]) -> list[dict]:
  """Per benchmark and composition, in the order `preds` (`predictors`' rows) give them:
  whether some quantity predicts failure (RULE), the quantities that do (each with its AUC
  text, p-value and direction) and how many were testable. DataError for a testable row
  without a finite p-value (rows written before `predictors` gave one): Holm would keep its
  yes uncorrected."""
  out = []
  for (bench, system), group in cells(preds).items():
    testable = [r for r in group if math.isfinite(float(r["auc"]))]
    stale = [r["quantity"] for r in testable if not math.isfinite(float(r.get("p", math.nan)))]
    if stale:
      raise DataError(f"{bench} / {system}: testable predictors without a p-value "
                      f"({', '.join(stale)}); recompute the rows with diagnostics_rows.predictors")
    kept = rules.holm([rules.Judgement(excludes_half(r), r["text"], float(r["p"]))
                       for r in testable])
    found = [{"quantity": r["quantity"], "text": r["text"], "p": float(r["p"]),
              "direction": ("larger" if float(r["auc"]) > 0.5 else "smaller")
              + " on failed problems"} for r, ok in zip(testable, kept, strict=True) if ok]
    out.append({"benchmark": bench, "system": system,
                "predicts": "not testable" if not testable else "yes" if found else "no",
                "quantities": found, "tested": len(testable)})
  return out
