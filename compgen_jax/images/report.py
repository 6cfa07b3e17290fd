"""report.md, claims.json (images/claims.py: the claims table's rows) and the figures of an
image-composition workdir or sweep dir (from its jsonl files alone)."""

import math
import os

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from compgen_jax import files  # noqa: E402
from compgen_jax import workdir as workdir_lib  # noqa: E402
from compgen_jax.analysis import claims as claims_table  # noqa: E402
from compgen_jax.analysis import figures, registration  # noqa: E402
from compgen_jax.analysis.markdown import table, text_cell  # noqa: E402
from compgen_jax.images import analysis  # noqa: E402
from compgen_jax.images import claims as claims_lib  # noqa: E402
from compgen_jax.types import ConfigError  # noqa: E402

REPORT_FILE, CLAIMS_FILE = workdir_lib.REPORT_FILE, workdir_lib.CLAIMS_FILE
SUCCESS_PNG = "success_vs_coverage.png"
DECODABILITY_PNG = "decodability_vs_coverage.png"
SCATTER_PNG = "decodability_vs_success.png"
# The prototype this experiment reproduces at CPU scale reached 94 % held-out success at 50 %
# coverage (results/cpu/images/README.md): drawn on the success figure as the reference.
PROTOTYPE = claims_lib.PROTOTYPE


def _levels_png(rows, keys: dict, path: str, ylabel: str, reference=None) -> str:
  """Seed mean +- sd of each key vs coverage (log x), one line per (program, key), one colour
  per program, each seed's value as a dot; `reference` (coverage, value) drawn as a star."""
  fig, ax = plt.subplots(figsize=(7.5, 3.8))
  programs = sorted({r["program"] for r in rows})
  seeds = set()
  for key, style in keys.items():
    levels = analysis.by_level(rows, key)
    for prog in programs:
      color = plt.cm.tab10(programs.index(prog) % 10)
      pts = [(c, *levels[(p, c)]) for p, c in levels if p == prog]
      seeds.update(p[3] for p in pts)
      ax.errorbar([p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts], capsize=2,
                  linestyle=style, marker="o", ms=3, color=color, label=f"{prog} {key}")
      mine = [r for r in rows if r["program"] == prog]
      ax.plot([r["coverage"] for r in mine], [float(r.get(key, math.nan)) for r in mine], ".",
              color=color, ms=3, alpha=0.4)
  if reference is not None:
    ax.plot(*reference, "k*", ms=10, label=f"prototype: {reference[1]:.0%} at "
            f"{reference[0]:.0%} coverage")
  ax.set_title(figures.caption(min(seeds, default=0)) + "; dots: seeds", fontsize=8)
  ax.set_xscale("log")
  ax.set_xlabel("coverage (fraction of combinations trained)")
  ax.set_ylabel(ylabel)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1))  # beside the data
  return figures.save(fig, path)


def _scatter_png(rows, x_key: str, path: str, stats: dict) -> str:
  fig, ax = plt.subplots(figsize=(4.8, 4))
  cov = np.array([r["coverage"] for r in rows])
  sc = ax.scatter([float(r.get(x_key, math.nan)) for r in rows],
                  [float(r[analysis.SUCCESS]) for r in rows], c=np.log2(cov), s=18,
                  cmap="viridis")
  fig.colorbar(sc, ax=ax, label="log2 coverage")
  ax.set_xlabel(f"decodability ({x_key})")
  ax.set_ylabel("held-out success")
  ax.set_title(f"Pearson {stats['pearson']:.2f}, Spearman {stats['spearman']:.2f}, partial "
               f"{stats['partial']:.2f} (n={stats['n']})", fontsize=8)
  ax.grid(alpha=0.3)
  return figures.save(fig, path)


def _num_concepts(rows) -> int:
  return len([k for k in rows[0] if k.startswith("ood_concept/")])


def _fmt(v) -> str:
  return "nan" if not np.isfinite(v) else f"{v:.3f}"


def level_table(rows) -> str:
  keys = (*analysis.levels(rows), *analysis.decodability(rows))
  stats = {k: analysis.by_level(rows, k) for k in keys}
  header = ["program", "coverage", "n_train", "seeds", *keys]
  n_train = {(r["program"], r["coverage"]): r.get("n_train") for r in rows}
  body = [[p, c, n_train[(p, c)], stats[keys[0]][(p, c)][2],
           *(f"{stats[k][(p, c)][0]:.3f} ± {stats[k][(p, c)][1]:.3f}" for k in keys)]
          for p, c in stats[keys[0]]]
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in body]
  return "\n".join(lines)


def correlation_table(rows) -> tuple[str, dict]:
  lines = ["| decodability | n | Pearson | Spearman | partial (log coverage) | "
           "mean within-level Pearson |", "|---|---|---|---|---|---|"]
  all_stats = {}
  for key in analysis.decodability(rows):
    s = analysis.across_runs(rows, key)
    all_stats[key] = s
    lines.append(f"| {key} | {s['n']} | {_fmt(s['pearson'])} | {_fmt(s['spearman'])} | "
                 f"{_fmt(s['partial'])} | {_fmt(s['within_mean'])} |")
  return "\n".join(lines), all_stats


def write(workdir: str, out_dir: str | None = None) -> str:
  """Writes report.md and figures into out_dir (default workdir); returns the report's path."""
  out_dir = out_dir or workdir
  os.makedirs(out_dir, exist_ok=True)
  rows = analysis.collect(workdir)
  if not rows:
    raise ConfigError("dir", f"no evaluated programs (eval.jsonl) under {workdir!r}: run "
                      "experiments/evaluate.py --workdir=<program> first")
  _levels_png(rows, {"id/success": "--", analysis.SUCCESS: "-"},
              os.path.join(out_dir, SUCCESS_PNG), "composition success (every slot right)",
              PROTOTYPE)
  _levels_png(rows, {"probe/all/t1/ood_acc": "-", "probe/fixed/t1/ood_acc": ":"},
              os.path.join(out_dir, DECODABILITY_PNG), "held-out probe accuracy (t = 1)")
  corr, stats = correlation_table(rows)
  main_key = analysis.DECODABILITY[0]
  _scatter_png(rows, main_key, os.path.join(out_dir, SCATTER_PNG), stats[main_key])
  rises = analysis.rises(rows)
  concept = np.array(analysis.per_concept(rows))
  within = stats[main_key]["within"]
  text = [
      "# Image composition: held-out success vs coverage, and decodability", "",
      f"{len(rows)} runs in {len({r['program'] for r in rows})} programs "
      f"({', '.join(sorted({r['program'] for r in rows}))}).", "",
      "## Held-out success vs coverage", "",
      f"![success]({SUCCESS_PNG})", "",
      *(f"- {p}: held-out success {' -> '.join(f'{m:.3f}' for m in v['means'])}; higher at the "
        f"most coverage than the least: **{'yes' if v['up'] else 'no'}**; monotone: "
        f"**{'yes' if v['monotone'] else 'no'}**" for p, v in rises.items()), "",
      level_table(rows), "",
      "## Decodability vs held-out success", "",
      f"![decodability]({DECODABILITY_PNG}) ![scatter]({SCATTER_PNG})", "",
      "Decodability: held-out accuracy of ridge probes (fitted on training combinations: `all`; "
      "on a fixed number of them: `fixed`) at the best layer by ID accuracy, at t = 1 (pure "
      "noise) or averaged over the sampling trajectory (`traj`).", "",
      corr, "",
      f"Within each coverage level ({main_key}): " + ", ".join(
          f"{c:g}: {_fmt(r)}" for c, r in within.items()), "",
      f"Per concept within a run (Spearman over the {_num_concepts(rows)} concepts, probe "
      f"recall vs held-out success of the prompts with the concept): mean "
      f"{_fmt(float(np.nanmean(concept)) if np.isfinite(concept).any() else math.nan)}, "
      f"positive in {int(np.sum(concept > 0))} of {int(np.sum(np.isfinite(concept)))} runs.", "",
  ]
  started = workdir_lib.read_index(workdir).get("started")
  found = [claims_table.registered(c, c["experiment"], started)
           for c in claims_lib.claims(rows, SUCCESS_PNG, SCATTER_PNG)]
  text += ["## Claims (claims.json)", "",
           "\n".join(f"- {claims_lib.RULES[k]}" for k in claims_lib.RULES), "",
           registration.sentence(started), "",
           table(["claim", "verdict", "ours", "composition (OOD against ID)",
                  "against the paper's value", "rule registered"],
                 [[text_cell(c["claim"]), f"**{c['verdict']}**", text_cell(c["ours"]),
                   text_cell(c["composition"]), text_cell(c["against_paper"]),
                   f"{c['registration']} ({c['rule_commit']})"] for c in found]),
           ""]
  files.write_text(os.path.join(out_dir, CLAIMS_FILE), claims_table.claims_json(found))
  return files.write_text(os.path.join(out_dir, REPORT_FILE), "\n".join(text))
