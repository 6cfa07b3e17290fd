"""report.md and figures of committed letter runs, from their rows alone (no models).

  python experiments/report.py --dir=results/cpu/letters

reads <dir>/runs/<name>/{config.json, scratch/metrics.jsonl, <experiment>/results.jsonl} and
<dir>/timings.jsonl, and rewrites <dir>/report.md, em.png, separation.png and length.png.
"""

import json
import os
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from compgen_jax import files, metric_writer  # noqa: E402
from compgen_jax import workdir as workdir_lib  # noqa: E402
from compgen_jax.analysis import figures  # noqa: E402
from compgen_jax.analysis.markdown import table  # noqa: E402
from compgen_jax.letters.training import SCRATCH  # noqa: E402

TIMINGS_FILE = "timings.jsonl"
REPORT_FILE = workdir_lib.REPORT_FILE
EXPERIMENTS = ("substitution", "length", "baselines", "background", "violations", "k_experts",
               "arithmetic")
EM_PNG, SEPARATION_PNG, LENGTH_PNG = "em.png", "separation.png", "length.png"


def _num(v) -> float:
  return float(v) if not isinstance(v, list) else float(np.max(v))


def load_runs(results_dir: str) -> dict[str, dict]:
  """{run name: {'config', 'metrics', <experiment>: rows}} in name order."""
  runs = {}
  root = os.path.join(results_dir, workdir_lib.RUNS_DIR)
  for name in sorted(os.listdir(root)):
    with open(os.path.join(root, name, workdir_lib.CONFIG_FILE)) as f:
      run = {"config": json.load(f),
             "metrics": metric_writer.read_rows(os.path.join(root, name, SCRATCH,
                                                             workdir_lib.METRICS_FILE))}
    for exp in EXPERIMENTS:
      rows = metric_writer.read_rows(os.path.join(root, name, exp, "results.jsonl"))
      if rows:
        run[exp] = rows
    runs[name] = run
  return runs


def composition_variant(cfg: dict) -> str:
  return ("one pass, per position" if cfg["data"]["layout"] == "position"
          else f"lockstep decoding ({cfg['data']['layout']})")


def final_losses(metrics: list[dict]) -> dict[str, float]:
  """Training loss of the scratch phase's last logged chunk (mean over its steps), mean over
  seeds, per task."""
  last = max(r["step"] for r in metrics)
  by_task = defaultdict(list)
  for r in metrics:
    if r["step"] == last:
      by_task[r["task"]].append(r["train/loss"])
  return {t: float(np.mean(v)) for t, v in by_task.items()}


def setting_rows(runs: dict) -> list[list]:
  rows = []
  for name, run in runs.items():
    c, loss = run["config"], final_losses(run["metrics"])
    det = [v for t, v in loss.items() if "|" not in t]  # mixtures keep their entropy
    m, t = c["model"], c["train"]
    rows.append([name, c["preset"], composition_variant(c), c["init"], c["num_seeds"],
                 f"{m['width']} / {m['positions']} / {'tied' if m['tie_head'] else 'untied'}",
                 f"{t['num_steps']} x {t['batch_size']}", f"{c['optim']['learning_rate']:g}",
                 f"{np.mean(det):.2g} (max {max(det):.2g})"])
  return rows


def em_rows(runs: dict) -> list[list]:
  rows = []
  for name, run in runs.items():
    by_pair = defaultdict(list)
    for r in run.get("substitution", []):
      by_pair[r["pair"]].append(r)
    for pair, rs in by_pair.items():
      em = [_num(r["exact_match"]) for r in rs]
      rows.append([name, pair, float(np.mean(em)), float(np.min(em)),
                   ", ".join(f"{v:.3f}" for v in em),
                   ", ".join(f"{_num(r['exact_match_all_sources']):.3f}" for r in rs)])
  return rows


def qualitative_rows(runs: dict, pair: str) -> list[list]:
  rows = []
  for name, run in runs.items():
    rs = [r for r in run.get("substitution", []) if r["pair"] == pair]
    if rs and rs[0].get("qualitative"):
      for q in rs[0]["qualitative"]:
        rows.append([name, q] + [r["qualitative"][q] for r in rs])
  return rows


_DIAG = ("overlap", "ortho_cos", "mean_abs_log_z_none", "mean_abs_log_z_one",
         "mean_abs_log_z_both", "mean_tail_boost", "mean_unranked_mass", "unranked_pick_frac",
         "mean_entropy_b", "mean_entropy_experts")


def diagnostic_rows(runs: dict) -> list[list]:
  """Seed means of the diagnostics: each substitution pair and each violations case."""
  rows = []
  for name, run in runs.items():
    groups = defaultdict(list)
    for r in run.get("substitution", []):
      groups[f"pair {r['pair']}"].append(r)
    for r in run.get("violations", []):
      groups[f"{r['case']} {r['experts']}"].append(r)
    for key, rs in groups.items():
      em = [_num(r.get("exact_match", r.get("exact_match_parallel"))) for r in rs]
      rows.append([name, key, float(np.mean(em))] + [
          f"{np.mean([_num(r.get(k, 'nan')) for r in rs]):.3g}" for k in _DIAG])
  return rows


def _seeds(em: list[float]) -> list:
  """Mean, worst seed and every seed's value of one cell."""
  return [float(np.mean(em)), float(np.min(em)), ", ".join(f"{v:.3f}" for v in em)]


def baseline_rows(runs: dict) -> list[list]:
  """Per run, pair and method, the exact match of each seed: the composition beside the model
  trained jointly on both substitutions, weight averaging, task arithmetic (lambda 0.5, 1), each
  expert alone and the background alone (letters/experiments.py's baselines)."""
  rows = []
  for name, run in runs.items():
    groups = defaultdict(list)
    for r in run.get("baselines", []):
      groups[(r["pair"], r["method"])].append(_num(r["exact_match"]))
    rows += [[name, pair, method, *_seeds(em)] for (pair, method), em in groups.items()]
  return rows


def background_rows(runs: dict) -> list[list]:
  """Per run, pair and background of the composition: exact match per seed, and the seed means
  of |log Z_t| and of the both-active fraction."""
  rows = []
  for name, run in runs.items():
    groups = defaultdict(list)
    for r in run.get("background", []):
      groups[(r["pair"], r["background"])].append(r)
    for (pair, bg), rs in groups.items():
      rows.append([name, pair, bg, *_seeds([_num(r["exact_match"]) for r in rs]),
                   f"{np.mean([_num(r['mean_abs_log_z']) for r in rs]):.3g}",
                   f"{np.mean([_num(r['overlap']) for r in rs]):.3g}"])
  return rows


def k_expert_rows(runs: dict) -> list[list]:
  """Per run and k (experts A>B, C>D, ... composed over one background): exact match per seed,
  the seed means of |log Z_t|, of the composed p(EOS) where the reference ends, and of its
  largest value anywhere else (on the reference's prefix)."""
  rows = []
  for name, run in runs.items():
    groups = defaultdict(list)
    for r in run.get("k_experts", []):
      groups[r["k"]].append(r)
    for k, rs in sorted(groups.items()):
      rows.append([name, k, *_seeds([_num(r["exact_match"]) for r in rs]),
                   f"{np.mean([_num(r['mean_abs_log_z']) for r in rs]):.3g}",
                   *[f"{np.mean([_num(r[k]) for r in rs]):.3g}" for k in (
                       "p_eos_at_eos", "max_p_eos_elsewhere")]])
  return rows


def arithmetic_rows(runs: dict) -> list[list]:
  """Per run and fine-tuned regime: how far task arithmetic's next-token distribution is from
  the composition's (max total variation over steps and seeds), and both exact matches."""
  rows = []
  for name, run in runs.items():
    groups = defaultdict(list)
    for r in run.get("arithmetic", []):
      groups[r["regime"]].append(r)
    for regime, rs in groups.items():
      rows.append([name, regime, f"{max(_num(r['max_tv']) for r in rs):.2g}",
                   *[f"{np.mean([_num(r[k]) for r in rs]):.3f}" for k in (
                       "exact_match_task_arithmetic", "exact_match_composition",
                       "exact_match_expert1_own", "exact_match_expert2_own")]])
  return rows


def _mean_over(em: dict, model: str, lo: int, hi: int) -> float:
  vals = [v for (m, n), vs in em.items() if m == model and lo <= n <= hi for v in vs]
  return float(np.mean(vals)) if vals else float("nan")


def length_rows(runs: dict) -> list[list]:
  """Exact match at lengths 1-4 and over 5-16 / 17-32, then the letters alone at 1-4."""
  rows = []
  for name, run in runs.items():
    em, letters = defaultdict(list), defaultdict(list)
    for r in run.get("length", []):
      em[(r["model"], int(r["length"]))].append(_num(r["exact_match"]))
      letters[(r["model"], int(r["length"]))].append(_num(r.get("letters_match", "nan")))
    for model in dict.fromkeys(m for m, _ in em):
      rows.append([name, model] + [_mean_over(em, model, n, n) for n in (1, 2, 3, 4)] + [
          _mean_over(em, model, 5, 16), _mean_over(em, model, 17, 32)] + [
          _mean_over(letters, model, n, n) for n in (1, 2, 3, 4)])
  return rows


def em_png(runs: dict, path: str) -> str:
  fig, ax = plt.subplots(figsize=(9, 4))
  labels = []
  for i, (name, run) in enumerate(runs.items()):
    for j, pair in enumerate(dict.fromkeys(r["pair"] for r in run.get("substitution", []))):
      em = [_num(r["exact_match"]) for r in run["substitution"] if r["pair"] == pair]
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
      ax1.scatter(max(_num(r["overlap"]), floor), max(_num(r["ortho_cos"]), floor), c=color,
                  marker=marker, s=18)
      ax3.scatter(i + 0.2 * (list(marks).index(r["case"]) - 1), _num(r["mean_abs_log_z"]),
                  c=color, marker=marker, s=18)
    for r in run.get("substitution", []):
      ax2.scatter(max(_num(r["unranked_pick_frac"]), floor), max(1 - _num(r["exact_match"]),
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
      em[(r["model"] == "composition", int(r["length"]))].append(_num(r["exact_match"]))
    for composed, color, label in ((False, "0.6", "single models (mean)"),
                                   (True, "C3", "composition (mean; dots: seeds)")):
      ns = sorted(n for c, n in em if c == composed)
      if not ns:
        continue
      ax.plot(ns, [np.mean(em[(composed, n)]) for n in ns], color=color, lw=1.5, label=label)
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
  if shown:  # one legend for the figure, clear of the panels' data
    fig.legend(*axes[0].get_legend_handles_labels(), fontsize=7, loc="lower right")
  fig.suptitle("length generalization: composition against the single models, per run",
               fontsize=10)
  return figures.save(fig, path)


def timing_rows(results_dir: str) -> list[list]:
  rows = metric_writer.read_rows(os.path.join(results_dir, TIMINGS_FILE))
  return [[r["run"], r["wall_s"] / 60, r["load"], r["command"]] for r in rows]


def render(runs: dict, results_dir: str, notes: str = "") -> str:
  """The report's markdown (figures are written by `write_report`)."""
  sections = [
      "# Letter substitution: logit composition (paper 2's toy)",
      "Regenerate (from the rows below this directory): "
      "`python experiments/report.py --dir=results/cpu/letters`.",
      notes,
      "## Runs",
      table(["run", "preset", "composition", "init", "seeds", "width / positions / head",
             "steps x batch", "lr", "final training loss (nats/token), mean over the "
             "non-mixture models (max)"],
            setting_rows(runs)),
      "## Exact match of the composition (held-out strings of length 16)",
      f"![exact match]({EM_PNG})",
      table(["run", "pair", "mean", "worst seed", "per seed", "per seed, strings with both "
             "source letters"], em_rows(runs)),
      "## The authors' strings, composed (A>K with M>B), every seed",
      table(["run", "input", "seed 0", "seed 1", "seed 2"],
            qualitative_rows(runs, "A>K,M>B")),
      "The same strings composed with A>B and C>D:",
      table(["run", "input", "seed 0", "seed 1", "seed 2"],
            qualitative_rows(runs, "A>B,C>D")),
      "## Diagnostics (means over seeds)",
      "overlap: fraction of scored steps where both experts are active (KL(p_i||p_b) > 0.1); "
      "|log Z| by the number of active experts at the step; tail boost: the largest "
      "sum_i (log p_i - log p_b) over tokens with p_b < 1e-3; unranked mass / picks: composed "
      "mass on, and argmaxes at, tokens that neither the background nor any expert ranks first; "
      "entropies in nats (experts: the larger of the two).",
      f"![separation]({SEPARATION_PNG})",
      table(["run", "pair / case", "EM", "overlap", "ortho cos", "|log Z| none", "|log Z| one",
             "|log Z| both", "tail boost", "unranked mass", "unranked picks", "H(p_b)",
             "H(p_i)"],
            diagnostic_rows(runs)),
      "## Baselines (held-out strings of length 16)",
      "The composition against what else can be made of the same models: one model trained on "
      "both substitutions (`joint`, an upper baseline), the experts' weights averaged "
      "(`weight_average`), the background plus lambda x the sum of the experts' task vectors "
      "(`task_arithmetic_<lambda>`), each expert and the background alone. Exact match per seed. "
      "An expert alone is right exactly on the strings without the other substitution's source "
      "letter, (25/26)^16 = 0.53 of uniform 16-letter strings, and the background on those with "
      "neither, (24/26)^16 = 0.28: these rows are the same in every run because the held-out "
      "strings are.",
      table(["run", "pair", "method", "mean", "worst seed", "per seed"], baseline_rows(runs)),
      "## Choice of background",
      "The same experts composed over a background trained on identity strings (the default), "
      "the uniform distribution, or a model trained on the mixture of both substitutions.",
      table(["run", "pair", "background", "mean", "worst seed", "per seed", "|log Z|",
             "overlap"], background_rows(runs)),
      "## k experts (A>B, C>D, E>F, ...) over one background",
      table(["run", "k", "mean", "worst seed", "per seed", "|log Z|",
             "composed p(EOS) at the end", "max elsewhere"], k_expert_rows(runs)),
      "## Task arithmetic against composition, by fine-tuned regime",
      "Experts fine-tuned from the background in one regime (`head`: the output head alone, "
      "`top1` / `top2`: the last one or two blocks and the head, `all`): where only the head "
      "moves, background + the sum of the task vectors (lambda 1) is the composition "
      "(max TV ~ 0).",
      table(["run", "regime", "max TV", "EM task arithmetic", "EM composition",
             "EM expert 1 (own task)", "EM expert 2 (own task)"], arithmetic_rows(runs)),
      "## Length generalization (trained at 16)",
      f"![length]({LENGTH_PNG})",
      "Exact match (whole output, EOS included) per length, then the output letters alone "
      "(`letters_match`, EOS step ignored) at lengths 1-4.",
      table(["run", "model", "L=1", "L=2", "L=3", "L=4", "L=5-16", "L=17-32", "letters L=1",
             "L=2", "L=3", "L=4"], length_rows(runs)),
      "## Wall times (measured, this 2-core CPU shared with other jobs)",
      table(["run", "minutes", "1-min load during the run", "command"], timing_rows(results_dir)),
  ]
  return "\n\n".join(s for s in sections if s) + "\n"


def write_report(results_dir: str, out_dir: str | None = None) -> str:
  """Renders `results_dir`'s runs into out_dir (default results_dir); returns report.md."""
  out_dir = out_dir or results_dir
  os.makedirs(out_dir, exist_ok=True)
  runs = load_runs(results_dir)
  notes_path = os.path.join(results_dir, "notes.md")
  notes = open(notes_path).read().strip() if os.path.exists(notes_path) else ""
  em_png(runs, os.path.join(out_dir, EM_PNG))
  separation_png(runs, os.path.join(out_dir, SEPARATION_PNG))
  length_png(runs, os.path.join(out_dir, LENGTH_PNG))
  return files.write_text(os.path.join(out_dir, REPORT_FILE), render(runs, results_dir, notes))

