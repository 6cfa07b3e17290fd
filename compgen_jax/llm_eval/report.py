"""The LLM composition report: accuracy per benchmark and system with its bootstrap interval
next to the paper's table, the paired comparisons the study asks for with their verdicts
(llm_eval/comparisons.py: over problems and, where the workdir scored several seeds' experts,
seeds), the composition diagnostics at decode time (expert activity, overlap, log Z_t, EOS;
seed 0's experts), two figures, and, when the evaluate pass has run (llm_eval/diagnose.py),
its section (llm_eval/evaluate_report.py: the diagnostics summary, the AUC of each pre-scoring
quantity for failure, a verdict per benchmark and composition), pooled over every seed it has
diagnosed (llm_eval/diagnostics_rows.py; `read` does the pooling).

Written from rows alone (`runner.summarize`'s, the per-problem rows, the pass's per-problem
rows of each seed), so it can be rebuilt from the jsonl files (`rewrite`).
"""

import os

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from compgen_jax import files, metric_writer  # noqa: E402
from compgen_jax import workdir as workdir_lib  # noqa: E402
from compgen_jax.analysis import correlations, markdown  # noqa: E402
from compgen_jax.llm_eval import (  # noqa: E402
  comparisons,
  diagnostics_rows,
  evaluate_report,
  report_tables,
)

# Kumar et al. 2026, Gemma-2-2B base / coding / math experts, composed (% accuracy or pass@1)
PAPER = {
    "gsm8k": {"base": 3.2, "coding": 3.2, "math": 50.2, "composed": 41.2},
    "math": {"base": 16.3, "coding": 16.7, "math": 25.5, "composed": 24.2},
    "humaneval_plus": {"base": 3.7, "coding": 24.4, "math": 13.4, "composed": 30.5},
    "mbpp_plus": {"base": 33.9, "coding": 38.1, "math": 32.8, "composed": 39.4},
}
# How the authors produced each number of PAPER (their supplement: Baselines_Code.ipynb for the
# three models alone, Selective_Composition_Code.ipynb for the composition, and its README).
# Each of the paper's numbers carries its protocol's letter in the report; the GSM8K row mixes
# two protocols, so its composed number is not comparable with the other three.
PROTOCOLS = {
    "a": "GSM8K zero-shot: an instruction ('... step by step. End your response with '#### "
         "<final numeric answer>'.') then 'Question: q\\nAnswer:'; Hugging Face generate, "
         "greedy, 512 new tokens; the authors' own extractor (the first number after the last "
         "'####', else after 'the answer is' / 'final answer is' / 'answer:', else a number "
         "ending the text, else the text's first number) and exact match "
         "(Baselines_Code.ipynb)",
    "b": "GSM8K 8-shot through lm-eval-harness (task gsm8k, batch size 1), flexible-extract "
         "exact match (Selective_Composition_Code.ipynb)",
    "c": "MATH (MATH-lighteval, every test subject) with the notebooks' 2-shot prompt, the "
         "first \\boxed{} answer after light normalisation (the same prompt and scorer in both "
         "notebooks)",
    "d": "EvalPlus's own prompt, greedy, 512 new tokens, evalplus.evaluate pass@1 (the same "
         "in both notebooks)",
}
PAPER_PROTOCOL = {
    "gsm8k": {"base": "a", "coding": "a", "math": "a", "composed": "b"},
    "math": dict.fromkeys(("base", "coding", "math", "composed"), "c"),
    "humaneval_plus": dict.fromkeys(("base", "coding", "math", "composed"), "d"),
    "mbpp_plus": dict.fromkeys(("base", "coding", "math", "composed"), "d"),
}


def _paper_cell(bench: str, system: str) -> str:
  """' [41.2 b]': the paper's number and the letter of its protocol ('' when none)."""
  value = PAPER.get(bench, {}).get(system)
  return "" if value is None else f" [{value} {PAPER_PROTOCOL[bench][system]}]"


def protocol_note(rows: list[dict]) -> str:
  """Which protocol produced each of the paper's numbers in the table, and that ours is one
  per benchmark ('' when no row's benchmark has paper numbers)."""
  benches, systems, _ = report_tables.grid(rows)
  used = sorted({PAPER_PROTOCOL[b][s] for b in benches for s in systems
                 if s in PAPER_PROTOCOL.get(b, {})})
  if not used:
    return ""
  mixed = [b for b in benches if len(set(PAPER_PROTOCOL.get(b, {}).values())) > 1]
  lines = [f"- {k}: {PROTOCOLS[k]}" for k in used]
  return "\n\n".join([
      "\n".join(["Protocols of the paper's numbers (the letter after each bracketed value):",
                 *lines]),
      *([f"The paper's {', '.join(mixed)} row mixes protocols (its table calls the row "
         "8-shot): its models alone were scored zero-shot with the authors' own extractor, "
         "the composition 8-shot through lm-eval, so the composed number is not comparable "
         "with the others in that row."] if mixed else []),
      "Ours: every system of a benchmark is scored by one protocol (the benchmark's prompt, "
      "decoding and scorer in this workdir's config.json), so each row here compares like "
      "with like."])


def table(rows: list[dict], cells: dict | None = None) -> str:
  """Accuracy (%) per benchmark (rows) and system (columns), the paper's value in brackets
  with the letter of the protocol that produced it (`protocol_note`); with `cells`
  (comparisons.cells), the mean over seeds and problems and its 95% interval in parentheses."""
  benches, systems, at = report_tables.grid(rows)
  cells = cells or {}
  body = []
  for b in benches:
    seeds = max((cells[b, s].seeds for s in systems if (b, s) in cells), default=1)
    line = [f"{b} (n={max(at[b, s]['num_problems'] for s in systems if (b, s) in at)}"
            + (f", {seeds} seeds)" if seeds > 1 else ")")]
    for s in systems:
      r, c = at.get((b, s)), cells.get((b, s))
      cell = ("-" if r is None else f"{100 * r['accuracy']:.1f}" if c is None else
              f"{100 * c.value:.1f} ({100 * c.low:.1f}-{100 * c.high:.1f})")
      line.append(cell + _paper_cell(b, s))
    body.append(line)
  return markdown.table(["benchmark"] + systems, body)


def diagnostics_table(rows: list[dict]) -> str:
  """Per composition and benchmark: its step spec, how often each expert is active, the
  largest pairwise overlap, |log Z_t|, EOS behaviour and length."""
  body = [[r["benchmark"], r["system"], r.get("spec", ""),
           " / ".join(f"{a:.2f}" for a in r["active_frac_K"]),
           r["overlap"], r["mean_abs_log_z"], r["max_abs_log_z"], r["mean_p_eos"],
           " / ".join(f"{p:.3f}" for p in r["mean_p_eos_M"]), r["finish_eos"],
           r["finish_budget"], f"{r['mean_tokens']:.0f}"]
          for r in rows if r["kind"] == "composed"]
  return markdown.table(
      ["benchmark", "composition", "step spec", "active frac per expert", "max overlap",
       "mean |log Z|", "max |log Z|", "p(EOS) composed", "p(EOS) per model (b first)",
       "ends at EOS", "hits budget", "mean tokens"], body)


def accuracy_png(rows: list[dict], path: str, cells: dict | None = None) -> None:
  """Bars per benchmark and system; with `cells`, their means and 95% intervals."""
  benches, systems, at = report_tables.grid(rows)
  cells = cells or {}
  fig, ax = plt.subplots(figsize=(1.6 + 1.2 * len(benches) * max(len(systems), 1) / 3, 3.4))
  width = 0.8 / max(len(systems), 1)
  for j, s in enumerate(systems):
    c = [cells.get((b, s)) for b in benches]
    ys = [100 * (c[i].value if c[i] else at[b, s]["accuracy"]) if (b, s) in at else np.nan
          for i, b in enumerate(benches)]
    err = np.asarray([[y - 100 * c[i].low, 100 * c[i].high - y] if c[i] else [0.0, 0.0]
                      for i, y in enumerate(ys)]).T
    ax.bar(np.arange(len(benches)) + j * width, ys, width, label=s,
           yerr=err if cells else None, ecolor="0.3", capsize=2)
  for j, s in enumerate(systems):  # the paper's values as markers over the matching bars
    for i, b in enumerate(benches):
      if s in PAPER.get(b, {}):
        ax.plot(i + j * width, PAPER[b][s], "k*", ms=7,
                label="paper (Gemma-2-2B)" if (i, j) == (0, 0) else None)
  ax.set_xticks(np.arange(len(benches)) + 0.4 - width / 2, benches)
  ax.set_ylabel("accuracy / pass@1 (%)")
  ax.legend(fontsize=7, ncol=2)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def diagnostics_png(rows: list[dict], path: str) -> None:
  comp = [r for r in rows if r["kind"] == "composed"]
  if not comp:
    return
  labels = [f"{r['benchmark']}\n{r['system']}" for r in comp]
  fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
  x = np.arange(len(comp))
  axes[0].bar(x, [r["overlap"] for r in comp])
  axes[0].set_title("max pairwise overlap of active sets")
  axes[1].bar(x, [r["mean_abs_log_z"] for r in comp])
  axes[1].set_title("mean |log Z_t|")
  axes[2].bar(x - 0.2, [r["mean_p_eos"] for r in comp], 0.4, label="p(EOS) composed")
  axes[2].bar(x + 0.2, [r["finish_eos"] for r in comp], 0.4, label="ends at EOS")
  axes[2].legend(fontsize=7)
  axes[2].set_title("EOS")
  for ax in axes:
    ax.set_xticks(x, labels, fontsize=6)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def unisolated_note(rows: list[dict]) -> str:
  """A warning naming every (benchmark, system) whose generated code ran outside the sandbox
  (allow_unisolated=True), or "" when every code benchmark ran isolated."""
  bad = [f"{r['benchmark']} / {r['system']} ({100 * (1 - r['scored_isolated']):.0f}% of "
         f"problems)" for r in rows if r.get("scored_isolated", 1.0) < 1.0]
  if not bad:
    return ""
  return ("**Scored unisolated** (allow_unisolated=True: generated code ran without the "
          "sandbox, so a program could have changed its own result): " + "; ".join(bad) + ".")


def _pp(v: float) -> str:
  return f"{100 * v:+.1f}"


def comparisons_table(rows: list[dict]) -> str:
  body = [[r["question"], r["benchmark"], r["system"], r["other"],
           f"{100 * r['accuracy']:.1f} - {100 * r['other_accuracy']:.1f}",
           f"{_pp(r['difference'])} [{_pp(r['low'])}, {_pp(r['high'])}]", r["verdict"]]
          for r in rows]
  return markdown.table(["question", "benchmark", "A", "B", "accuracy A - B (%)",
                         "difference (pp) [95% interval]", "verdict"], body)


def seeds_table(problems: list[dict]) -> str:
  """Accuracy (%) per benchmark, system and seed ('all' for a system scored once)."""
  seeds = sorted({r["seed"] for r in problems})
  body = []
  for (b, s), sc in comparisons.scores(problems).items():
    at = dict(zip(sc.seeds, sc.correct_SxP.mean(axis=1), strict=True))
    once = sc.seeds == (0,)
    body.append([b, s, *(f"{100 * at[0]:.1f} (all)" if once and k == 0 else "" if once else
                         f"{100 * at[k]:.1f}" if k in at else "-" for k in seeds)])
  return markdown.table(["benchmark", "system", *(f"seed {k}" for k in seeds)], body)


def comparisons_section(summary: list[dict], problems: list[dict]) -> str:
  """The report's comparisons: how the intervals are made, the rule, the table, and with more
  than one seed, each seed's accuracy."""
  seeds = sorted({r["seed"] for r in problems})
  rows = comparisons.compare(summary, problems)
  strongest_note = (" The strongest trivial baseline (issue 55; llm_eval/baselines.py: no "
                    "model, scored once, its rows standing for every seed): of the baselines "
                    "scored on the expert's own benchmark, the one of the highest accuracy "
                    "there (ties: the first scored).")
  how = (f"{len(seeds)} seeds of expert fine-tuning ({', '.join(map(str, seeds))}): intervals "
         "resample seeds and problems independently (crossed: every seed scores the same "
         "problems), each with replacement; the background is scored once (seed 0, which "
         "every expert is fine-tuned from) and stands for every seed" if len(seeds) > 1 else
         "1 seed of expert fine-tuning: intervals resample problems alone (another seed's "
         "variation is not in them)")
  return "\n\n".join([
      "## Comparisons, paired on the same problems and seeds",
      f"{how}. 95% percentile intervals of {correlations.BOOTSTRAP_DRAWS} bootstrap draws, "
      f"generator seed {correlations.BOOTSTRAP_SEED} (llm_eval/comparisons.py). "
      + comparisons.RULE + " Registered in `results/cpu/REGISTRATION.md` (LLM study, issue "
      "38) before the study's multi-seed runs; rows scored before that registration are judged "
      f"post hoc. The {comparisons.MAJORITY} (each expert against it on its own skill, where "
      "the rows carry gold answers): each problem answered with the gold most frequent among "
      "the other scored problems (ties: the first as text), the majority-class baseline "
      "cross-validated leave-one-out. Added 2026-12-07, after that registration: its verdicts "
      "are post hoc." + (strongest_note if any(r["question"] == comparisons.STRONGEST
                                               for r in rows) else ""),
      comparisons_table(rows) if rows else "No comparison: none of the compared pairs (an "
      "expert and the background, a composition and one of its members, a composition and a "
      "merge of its experts or the joint model) is scored here.",
      *(["Accuracy (%) per seed (the table above pools them):", seeds_table(problems)]
        if len(seeds) > 1 else [])])


def write(workdir: str, rows: list[dict], diagnosed: list[dict] = (),
          preds: list[dict] = (), problems: list[dict] = ()) -> str:
  """Writes report.md, accuracy.png and diagnostics.png into `workdir` (with intervals and
  the comparisons when the per-problem rows `problems` (comparisons.read) are given, and the
  evaluate pass's section when its summary rows `diagnosed` and predictor rows `preds` are);
  returns the path."""
  cells = comparisons.cells(problems) if problems else None
  accuracy_png(rows, os.path.join(workdir, "accuracy.png"), cells)
  diagnostics_png(rows, os.path.join(workdir, "diagnostics.png"))
  seeds = sorted({r["seed"] for r in problems})
  text = "\n\n".join([
      "# Logit composition of language models",
      "Accuracy (%) per benchmark and system; the paper's value (Gemma-2-2B) in brackets"
      + (f"; ours: the mean over {'seeds and ' if len(seeds) > 1 else ''}problems, its 95% "
         "bootstrap interval in parentheses (as the comparisons below)." if problems else "."),
      *filter(None, [unisolated_note(rows)]), table(rows, cells),
      *filter(None, [protocol_note(rows)]), markdown.figure("accuracy.png", "accuracy"),
      *([comparisons_section(rows, problems)] if problems else []),
      *filter(None, [report_tables.format_section(rows)]),
      "## Composition diagnostics" + (" at decode time (seed 0's experts; "
                                      "seed_<s>/report.md: seed s's)" if len(seeds) > 1 else ""),
      "Active: KL(p_i || p_b) above compose.kl_threshold at a generated token; overlap: the "
      "fraction of tokens where two experts are both active (0 under the paper's disjointness "
      "assumption); log Z_t = 0 under exact factorization.",
      diagnostics_table(rows), markdown.figure("diagnostics.png", "diagnostics"),
      *([evaluate_report.section(diagnosed, preds)] if diagnosed else [])])
  return files.write_text(os.path.join(workdir, workdir_lib.REPORT_FILE), text + "\n")


def read(workdir: str) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
  """A scored workdir's summary rows, the evaluate pass's summary and predictor rows pooled
  over every seed it has diagnosed (diagnostics_rows; [] when it has diagnosed none) and the
  per-problem rows of every seed (comparisons.read)."""
  diagnosed = diagnostics_rows.read(workdir)
  return (metric_writer.read_rows(os.path.join(workdir, workdir_lib.SUMMARY_FILE)),
          diagnostics_rows.summarize(diagnosed), diagnostics_rows.predictors(diagnosed),
          comparisons.read(workdir))


def rewrite(workdir: str) -> str:
  """The workdir's report again from its rows (`read`); returns its path."""
  return write(workdir, *read(workdir))
