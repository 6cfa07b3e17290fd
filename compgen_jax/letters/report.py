"""report.md and figures of committed letter runs, from their rows alone (no models).

  python experiments/report.py --dir=results/cpu/letters

reads <dir>/runs/<name>/{config.json, scratch/metrics.jsonl, <experiment>/results.jsonl} and
<dir>/timings.jsonl, and rewrites <dir>/report.md, claims.json (letters/claims.py: the claims
table's rows), em.png, separation.png and length.png.
"""

import os
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from compgen_jax import files, metric_writer  # noqa: E402
from compgen_jax import workdir as workdir_lib  # noqa: E402
from compgen_jax.analysis import claims as claims_table  # noqa: E402
from compgen_jax.analysis import figures, registration  # noqa: E402
from compgen_jax.analysis.markdown import table, text_cell  # noqa: E402
from compgen_jax.letters import claims as claims_lib  # noqa: E402
from compgen_jax.letters import report_rows as rows_lib  # noqa: E402
from compgen_jax.letters.report_rows import number  # noqa: E402

TIMINGS_FILE = "timings.jsonl"
REPORT_FILE, CLAIMS_FILE = workdir_lib.REPORT_FILE, workdir_lib.CLAIMS_FILE
EM_PNG, SEPARATION_PNG, LENGTH_PNG = claims_lib.EM_PNG, "separation.png", claims_lib.LENGTH_PNG


def em_png(runs: dict, path: str) -> str:
  fig, ax = plt.subplots(figsize=(9, 4))
  labels = []
  for i, (name, run) in enumerate(runs.items()):
    for j, pair in enumerate(dict.fromkeys(r["pair"] for r in run.get("substitution", []))):
      em = [number(r["exact_match"]) for r in run["substitution"] if r["pair"] == pair]
      x = 2.5 * i + j
      ax.bar(x, np.mean(em), color=f"C{j}", label=pair if i == 0 else None)
      ax.plot([x] * len(em), em, "k.", ms=4)
    labels.append((2.5 * i + 0.5, name))
  ax.set_xticks([x for x, _ in labels], [n for _, n in labels], rotation=30, ha="right",
                fontsize=7)
  ax.set(ylabel="exact match (bars: mean, dots: seeds)", ylim=(0, 1.02),
         title="composition of two experts over the identity model")
  ax.legend(fontsize=7)
  return figures.save(fig, path)


def separation_png(runs: dict, path: str) -> str:
  """Left: overlapping vs factorized pairs (every run and seed) in fraction of steps with two
  active experts vs the per-step log-ratio cosine. Middle: mean |log Z_t| of the same rows,
  which does not separate them. Right: what the composition's errors are: fraction of steps
  whose argmax no component ranks first vs 1 - exact match."""
  fig, (ax1, ax3, ax2) = plt.subplots(1, 3, figsize=(14, 4))
  marks = {"disjoint": ("C0", "o"), "chain": ("C2", "s"), "overlap": ("C3", "^")}
  floor = 1e-6
  for i, run in enumerate(runs.values()):
    for r in run.get("violations", []):
      color, marker = marks[r["case"]]
      ax1.scatter(max(number(r["overlap"]), floor), max(number(r["ortho_cos"]), floor), c=color,
                  marker=marker, s=18)
      ax3.scatter(i + 0.2 * (list(marks).index(r["case"]) - 1), number(r["mean_abs_log_z"]),
                  c=color, marker=marker, s=18)
    for r in run.get("substitution", []):
      ax2.scatter(max(number(r["unranked_pick_frac"]), floor), max(1 - number(r["exact_match"]),
                                                                 floor), c="C0", s=14)
  for case, (color, marker) in marks.items():
    ax1.scatter([], [], c=color, marker=marker, label=case)
  ax1.set(xscale="log", yscale="log", xlabel="fraction of steps with both experts active "
          "(KL > 0.1)", ylabel="|cos| of per-step log-ratios", title="overlap vs factorized")
  ax1.legend(fontsize=7)
  ax3.set_xticks(range(len(runs)), list(runs), rotation=40, ha="right", fontsize=6)
  ax3.set(ylabel="mean |log Z_t| over scored steps", title="log Z_t does not separate them")
  for ax in (ax1, ax2):
    ax.set(xlim=(floor / 2, 2), ylim=(floor / 2, 2))
  ax2.set(xscale="log", yscale="log", xlabel="fraction of steps picking a token no "
          "component ranks first", ylabel="1 - exact match (per run, pair, seed)",
          title=f"tail picks vs errors (< {floor:g} drawn at {floor:g})")
  return figures.save(fig, path)


def length_png(runs: dict, path: str) -> str:
  """Small multiples: per run, the composition's exact match against string length (each seed a
  dot, the mean a line) beside the single models' mean (grey: background and experts), with the
  trained length marked."""
  shown = {name: run for name, run in runs.items() if run.get("length")}
  fig, axes = figures.grid(max(len(shown), 1), width=3.2, height=2.6)
  for ax, (name, run) in zip(axes, shown.items(), strict=False):
    em = defaultdict(list)
    for r in run["length"]:
      if r["model"] != "joint":  # trained on both substitutions: not a component
        em[(r["model"] == "composition", int(r["length"]))].append(number(r["exact_match"]))
    for composed, color in ((False, "0.6"), (True, "C3")):
      ns = sorted(n for c, n in em if c == composed)
      if not ns:
        continue
      ax.plot(ns, [np.mean(em[(composed, n)]) for n in ns], color=color, lw=1.5)
      if composed:
        for n in ns:
          ax.plot([n] * len(em[(composed, n)]), em[(composed, n)], ".", color=color, ms=3,
                  alpha=0.6)
    ax.axvline(16, color="k", lw=0.5, ls=":")
    ax.set_title(name, fontsize=8)
    ax.set(xlabel="string length (trained at 16)", ylim=(-0.02, 1.02))
    ax.yaxis.set_tick_params(labelleft=True)
    ax.grid(alpha=0.3)
  axes[0].set_ylabel("exact match")
  # the key in the title: a legend inside the full grid would cover a panel
  fig.suptitle("length generalization per run: composition (red: mean; dots: seeds) against "
               "the single models (grey: mean of background and experts)", fontsize=10)
  return figures.save(fig, path)


def timing_rows(results_dir: str) -> list[list]:
  rows = metric_writer.read_rows(os.path.join(results_dir, TIMINGS_FILE))
  return [[r["run"], r["wall_s"] / 60, r["load"], r["command"]] for r in rows]


def render(runs: dict, results_dir: str, notes: str = "", passes: dict | None = None) -> str:
  """The report's markdown (figures are written by `write_report`); `passes`: the step-spec
  passes (report_rows.STEP_SPECS_DIR), a section when there are any."""
  sections = [
      "# Letter substitution: logit composition (paper 2's toy)",
      "Regenerate (from the rows below this directory): "
      "`python experiments/report.py --dir=results/cpu/letters`.",
      notes,
      *_claims_section(runs),
      "## Runs",
      table(["run", "preset", "composition", "init", "seeds", "width / positions / head",
             "steps x batch", "lr", "final training loss (nats/token), mean over the "
             "non-mixture models (max)"],
            rows_lib.setting_rows(runs)),
      "## Exact match of the composition (held-out strings of length 16)",
      f"![exact match]({EM_PNG})",
      table(["run", "pair", "mean", "worst seed", "per seed", "per seed, strings with both "
             "source letters"], rows_lib.em_rows(runs)),
      "## The authors' strings, composed (A>K with M>B), every seed",
      table(["run", "input", "seed 0", "seed 1", "seed 2"],
            rows_lib.qualitative_rows(runs, "A>K,M>B")),
      "The same strings composed with A>B and C>D:",
      table(["run", "input", "seed 0", "seed 1", "seed 2"],
            rows_lib.qualitative_rows(runs, "A>B,C>D")),
      "## Diagnostics (means over seeds)",
      "overlap: fraction of scored steps where both experts are active (KL(p_i||p_b) > 0.1); "
      "|log Z| by the number of active experts at the step; tail boost: the largest "
      "sum_i (log p_i - log p_b) over tokens with p_b < 1e-3; unranked mass / picks: composed "
      "mass on, and argmaxes at, tokens that neither the background nor any expert ranks first; "
      "entropies in nats (experts: the larger of the two).",
      f"![separation]({SEPARATION_PNG})",
      table(["run", "pair / case", "EM", *(h for _, h in rows_lib.diagnostic_columns(runs))],
            rows_lib.diagnostic_rows(runs)),
      "## Baselines (held-out strings of length 16)",
      "The composition against what else can be made of the same models: one model trained on "
      "both substitutions (`joint`, an upper baseline), the experts' weights averaged "
      "(`weight_average`), the background plus lambda x the sum of the experts' task vectors "
      "(`task_arithmetic_<lambda>`), each expert and the background alone. Exact match per seed. "
      "An expert alone is right exactly on the strings without the other substitution's source "
      "letter, (25/26)^16 = 0.53 of uniform 16-letter strings, and the background on those with "
      "neither, (24/26)^16 = 0.28: these rows are the same in every run because the held-out "
      "strings are.",
      table(["run", "pair", "method", "mean", "worst seed", "per seed"],
            rows_lib.baseline_rows(runs)),
      "## Choice of background",
      "The same experts composed over a background trained on identity strings (the default), "
      "the uniform distribution, or a model trained on the mixture of both substitutions.",
      table(["run", "pair", "background", "mean", "worst seed", "per seed", "|log Z|",
             "overlap"], rows_lib.background_rows(runs)),
      "## k experts (A>B, C>D, E>F, ...) over one background",
      table(["run", "k", "mean", "worst seed", "per seed", "|log Z|",
             "composed p(EOS) at the end", "max elsewhere"], rows_lib.k_expert_rows(runs)),
      *(["The same k experts' baselines (`k_baselines`): one model trained on all k "
         "substitutions (`joint`; k = 1: the expert), weight averaging and task arithmetic of "
         "the background and the k experts, beside their composition. Exact match per seed; "
         "the one-pass layout has no EOS (nan above).",
         table(["run", "k", "method", "mean", "worst seed", "per seed"],
               rows_lib.k_baseline_rows(runs))] if rows_lib.k_baseline_rows(runs) else []),
      "## Task arithmetic against composition, by fine-tuned regime",
      "Experts fine-tuned from the background in one regime (`head`: the output head alone, "
      "`top1` / `top2`: the last one or two blocks and the head, `all`): where only the head "
      "moves, background + the sum of the task vectors (lambda 1) is the composition "
      "(max TV ~ 0).",
      table(["run", "regime", "max TV", "EM task arithmetic", "EM composition",
             "EM expert 1 (own task)", "EM expert 2 (own task)"], rows_lib.arithmetic_rows(runs)),
      "## Length generalization (trained at 16)",
      f"![length]({LENGTH_PNG})",
      "Exact match (whole output, EOS included) per length, then the output letters alone "
      "(`letters_match`, EOS step ignored) at lengths 1-4.",
      table(["run", "model", "L=1", "L=2", "L=3", "L=4", "L=5-16", "L=17-32", "letters L=1",
             "L=2", "L=3", "L=4"], rows_lib.length_rows(runs)),
      *(_pass_sections(passes) if passes else []),
      "## Wall times (measured, this 2-core CPU shared with other jobs)",
      table(["run", "minutes", "1-min load during the run", "command"], timing_rows(results_dir)),
  ]
  return "\n\n".join(s for s in sections if s) + "\n"


def _claims_section(runs: dict) -> list[str]:
  """The claims table's rows (claims.json), their rules and when those were registered."""
  return [
      "## Claims (claims.json)",
      "\n".join(f"- {claims_lib.RULES[k]}" for k in claims_lib.RULES),
      registration.sentence(None) + " These rules were registered after the runs committed "
      "here by then had been made: their verdicts are post hoc (each row's last column: the "
      "commit that registered the latest of its rules).",
      table(["claim", "verdict", "ours", "composition (OOD against ID)",
             "against the paper's value", "rule registered"],
            [[text_cell(c["claim"]), f"**{c['verdict']}**", text_cell(c["ours"]),
              text_cell(c["composition"]), text_cell(c["against_paper"]),
              f"{c['registration']} ({c['rule_commit']})"] for c in claims_lib.claims(runs)]),
  ]


def _pass_sections(passes: dict) -> list[str]:
  return [
      "## Step specs and EOS rules (evaluate-only passes over trained runs)",
      f"The same checkpoints decoded again under other step specs (composition/spec.py; one "
      f"folder per pass in {rows_lib.STEP_SPECS_DIR}/, the spec in its rows). Exact match on "
      f"held-out strings of length 16, mean over seeds [95% t-interval over seeds], and per "
      f"seed.",
      table(["trained setting", "pair", "step spec", "mean [95% CI]", "per seed"],
            rows_lib.step_spec_rows(passes)),
      "k experts (A>B, C>D, E>F, ...) over one background under each step spec, first the "
      "paper's operator under each EOS rule (`paper`: the composed p(EOS); `eos=background`: "
      "p_b(EOS); `eos=vote`: EOS when most models in use rank it first; `eos=min`: the smallest "
      "p_m(EOS)); mean [95% t-interval over seeds]:",
      table(["trained setting", "k", *rows_lib.k_spec_columns(passes)],
            rows_lib.k_spec_rows(passes)),
  ]


def write_report(results_dir: str, out_dir: str | None = None) -> str:
  """Renders `results_dir`'s runs into out_dir (default results_dir); returns report.md."""
  out_dir = out_dir or results_dir
  os.makedirs(out_dir, exist_ok=True)
  runs = rows_lib.load_runs(results_dir)
  passes = rows_lib.load_runs(results_dir, rows_lib.STEP_SPECS_DIR)
  notes_path = os.path.join(results_dir, "notes.md")
  notes = open(notes_path).read().strip() if os.path.exists(notes_path) else ""
  em_png(runs, os.path.join(out_dir, EM_PNG))
  separation_png(runs, os.path.join(out_dir, SEPARATION_PNG))
  length_png(runs, os.path.join(out_dir, LENGTH_PNG))
  files.write_text(os.path.join(out_dir, CLAIMS_FILE),
                   claims_table.claims_json(claims_lib.claims(runs)))
  return files.write_text(os.path.join(out_dir, REPORT_FILE),
                          render(runs, results_dir, notes, passes))

