"""The evaluate pass's section of the LLM report (llm_eval/diagnose.py's rows, pooled over
seeds by llm_eval/diagnostics_rows.py): its summary per benchmark and composition, the AUC of each
pre-scoring quantity for failure, and the verdict per benchmark and composition (Holm over its
quantities). llm_eval/report.py places the section; diagnose.py and the llm_study pipeline print
its tables.
"""

from compgen_jax.analysis import markdown
from compgen_jax.llm_eval import diagnostics_rows


def _pooled_over(r: dict) -> str:
  """' (40 problems x 3 seeds)' for a row pooled over seeds, else ''."""
  return f" ({r['problems']} problems x {r['seeds']} seeds)" if "seeds" in r else ""


def summary_table(summary: list[dict]) -> str:
  """The evaluate pass's rows per benchmark and composition (diagnostics_rows.summarize);
  counts over (seed, problem) rows, which a row pooled over seeds says."""
  body = [[r["benchmark"], r["system"],
           f"{r['num_correct']}/{r['num_problems']}{_pooled_over(r)}",
           " / ".join(f"{a:.2f}" for a in r["active_frac_K"]), f"{r['overlap']:.2f}",
           f"{r['mean_abs_log_z']:.2f}", f"{r['unranked_pick_frac']:.3f}",
           f"{r['mean_tail_boost']:.2f}", f"{r['finish_eos']}/{r['num_problems']}",
           "-" if r["eos_first_frac_M"] is None else
           " / ".join(f"{a:.2f}" for a in r["eos_first_frac_M"]),
           "-" if r["eos_first_none"] is None else f"{r['eos_first_none']:.2f}"]
          for r in summary]
  return markdown.table(
      ["benchmark", "composition", "correct", "active frac per expert", "max overlap",
       "mean |log Z|", "unranked picks", "mean tail boost", "ends at EOS",
       "EOS ranked first by (b first)", "by none"], body)


def _auc_cell(r: dict) -> str:
  """The row's text (AUC [interval], or not testable), bold when the interval excludes 0.5."""
  return f"**{r['text']}**" if diagnostics_rows.excludes_half(r) else r["text"]


def predictors_table(preds: list[dict]) -> str:
  """Per benchmark and composition, each quantity's AUC for failure
  (diagnostics_rows.predictors), in the order the rows name the quantities."""
  quantities = list(dict.fromkeys(r["quantity"] for r in preds))
  body = []
  for (b, s), group in diagnostics_rows.cells(preds).items():
    at = {r["quantity"]: r for r in group}
    first = at[quantities[0]]
    body.append([b, s, f"{first['successes']} of {first['successes'] + first['failures']}"
                 + _pooled_over(first),
                 *(_auc_cell(at[q]) for q in quantities)])
  return markdown.table(["benchmark", "composition", "solved", *quantities], body)


def verdict_table(preds: list[dict]) -> str:
  """Per benchmark and composition, whether a pre-scoring quantity predicts failure
  (diagnostics_rows.verdicts): the quantities that survive Holm, each with its AUC, bootstrap
  p-value and direction."""
  body = [[v["benchmark"], v["system"], f"**{v['predicts']}**", v["tested"],
           "; ".join(f"{q['quantity']} {q['text']}, p = {q['p']:.3f}, {q['direction']}"
                     for q in v["quantities"]) or "-"]
          for v in diagnostics_rows.verdicts(preds)]
  return markdown.table(["benchmark", "composition", "predicts failure", "quantities tested",
                         "surviving Holm (AUC [interval], p, direction)"], body)


def section(summary: list[dict], preds: list[dict]) -> str:
  """The evaluate pass's part of the report: its summary, then the predictors (pooled over
  seeds where their rows say so) and their verdicts."""
  seeds = max((r.get("seeds", 1) for r in [*summary, *preds]), default=1)
  return "\n\n".join([
      "## Diagnostics of the composed decodes, teacher-forced (the evaluate pass)"
      + (f", {seeds} seeds' experts pooled" if seeds > 1 else ""),
      "Each composition's decodes scored again by its member models (llm_eval/diagnose.py), "
      + (f"tokens pooled over problems and the {seeds} seeds' experts (counts over (seed, "
         "problem) pairs). " if seeds > 1 else "tokens pooled over problems. ") +
      "Unranked picks: the fraction of tokens whose composed "
      "argmax no model ranks first; tail boost: the composed logit minus log p_b on tokens "
      "with p_b < 1e-3; EOS ranked first: among the sequences that end at EOS, the fraction "
      "in which each model's own argmax is EOS at that step.",
      summary_table(summary),
      "## Do the pre-scoring quantities predict failure?",
      "AUC of each quantity (computed from the decode alone, before scoring) for failure: > "
      "0.5 when it is larger on failed problems; 95% bootstrap interval over problems"
      + ("; over the (seed, problem) pairs, the interval resampling problems, each drawn with "
         "all its seeds (one problem's seeds are not independent)" if seeds > 1 else "")
      + "; bold "
      "where the interval excludes 0.5; not testable with too few successes or failures "
      "(analysis.correlations.MIN_CLASS), which the cell counts.",
      predictors_table(preds),
      f"Verdict: {diagnostics_rows.RULE}.",
      verdict_table(preds)])
