"""Report sections over model settings: model size and decodability vs generalization (the
encoding table and the encoding-nonlinearity check: sections_encodings.py). Each takes the
sweep's run rows, the metrics (primary first) and the output directory, and returns its
markdown and its claims (verdicts.claim records)."""

import math
import os

import numpy as np

from compgen_jax.analysis import aggregate, figures, load, paper, plots, sections_data, verdicts
from compgen_jax.analysis import markdown as md
from compgen_jax.analysis.aggregate import Metric
from compgen_jax.analysis.verdicts import n_seeds

TASK_DECODER = load.DECODABILITY  # z at the best student layer (by ID probe R^2), OOD tasks
INPUT_DECODER = "z/input/ood_r2"  # z from phi(z) itself
GENERALIZES = 0.9  # an OOD R^2 (and a task decoder R^2) at least this large is called high
WIDER = (f"width to {GENERALIZES}: the width at which the seed-mean OOD curve (over width, at one "
         f"depth) would reach {GENERALIZES} if it kept the gain per doubling of width of its last "
         f"two points (linear in log2 width; an extrapolation, not a measurement; 'never' when "
         f"the last doubling gained nothing)")
# Covariates a correlation is made partial on, where they vary: the swept sizes.
SIZES = (("n_train", math.log, "log n_train"), ("student.mlp.width", math.log2, "log2 width"),
         ("student.mlp.depth", float, "depth"))


def model_size(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str):
  """OOD performance against width (one panel per encoding, a line per depth)."""
  keys = ("encoding.name", "student.mlp.depth", "student.mlp.width")
  parts = [md.claim(paper.CLAIMS["model_size"]),
           md.rules(verdicts.RULES["seeds"], verdicts.RULES["rises"], verdicts.RULES["fits"],
                    WIDER),
           ""]
  claims = []
  for metric in metrics:
    curves = aggregate.curves(rows, metric.key, "encoding.name", "student.mlp.depth",
                              "student.mlp.width")
    ids = aggregate.curves(rows, metric.id_key, "encoding.name", "student.mlp.depth",
                           "student.mlp.width")
    by_width = aggregate.curves(rows, metric.key, "encoding.name", "student.mlp.width",
                                "student.mlp.depth")
    wider, deeper, table = [], [], []
    for enc, lines in curves.items():
      for depth, c in lines.items():
        j = verdicts.rises([aggregate.values(g.rows, metric.key) for g in c.groups])
        if len(c.x) > 1:  # a depth swept at one width says nothing about width
          wider.append(j.ok)
          table.append([enc, f"depth {depth}", "width", c.seeds, md.word(j.ok), j.detail,
                        md.fmt(aggregate.gain_per_doubling(c.x, c.mean)),
                        md.reach(aggregate.reach_at_last_gain(c.x, c.mean, GENERALIZES), c.x)])
    for enc, lines in by_width.items():
      for width, c in lines.items():
        j = verdicts.rises([aggregate.values(g.rows, metric.key) for g in c.groups])
        if len(c.x) > 1:
          deeper.append(j.ok)
          table.append([enc, f"width {width}", "depth", c.seeds, md.word(j.ok), j.detail, "-",
                        "-"])
    seeds = min((c.seeds for lines in curves.values() for c in lines.values()), default=0)
    fname = f"model_size_{metric.slug}.png"
    fit_line = md.fits_check(rows, metric, verdicts.FITS_ID)
    note = verdicts.fits_note(rows, metric.id_key)
    parts.append(fit_line)
    for axis, oks, over in (("width", wider, "encoding and depth"),
                            ("depth", deeper, "encoding and width")):
      if not oks:  # the sweep does not vary this axis: no claim about it
        continue
      word = verdicts.overall(oks)
      parts.append(md.verdict(f"{metric.label} rises with {axis} at every {over}", word,
                              verdicts.count(oks)))
      claims.append(verdicts.claim(f"{metric.label} rises with the student's {axis}, for "
                                   f"every encoding", "rises", f"{verdicts.count(oks)} "
                                   f"({n_seeds(seeds)})", seeds, word, fname, note))
    parts += ["", md.table(["encoding", "at", "over", "seeds", "rises",
                            "detail (95% intervals)", "gain per doubling (last)",
                            f"width to {GENERALIZES} (extrapolated)"], table)]
    panels = [(f"encoding: {enc}", [sections_data.series(f"depth {d}", c,
                                                         ids.get(enc, {}).get(d))
                                    for d, c in lines.items()])
              for enc, lines in curves.items()]
    path = figures.curves_png(panels, os.path.join(out_dir, fname), "MLP width", metric.label,
                              xscale="log2", chance=metric.chance, title=figures.caption(seeds))
    parts.append(md.figure(os.path.basename(path), f"{metric.label} vs width",
                           f"{metric.label} (solid) and ID (dashed) against width; "
                           f"{figures.caption(seeds)}."))
  parts.append("\n" + _model_table(rows, metrics, keys))
  return "\n".join(parts), claims


def _model_table(rows: list[dict], metrics: tuple[Metric, ...], keys: tuple[str, ...]) -> str:
  probes = [(label, key) for label, key in (("task decoder R^2", TASK_DECODER),
                                             ("input decoder R^2", INPUT_DECODER))
            if any(key in r for r in rows)]
  body = []
  for g in aggregate.group(rows, keys, metrics[0].key):
    body.append([*g.key, *(c for m in metrics for c in md.cells(g.rows, m)),
                 *(md.mean_sd(*aggregate.summarize(aggregate.values(g.rows, key))[:2])
                   for _, key in probes), g.n])
  return md.table(["encoding", "depth", "width", *(h for m in metrics for h in md.cell_header(m)),
                   *(label for label, _ in probes), "seeds"], body)


def _short(key: str) -> str:
  """'encoding.name' -> 'encoding', 'task.num_modules' -> 'M'."""
  return {"task.num_modules": "M", "task.max_hotness": "K"}.get(
      key, key.split(".")[0] if key.endswith(".name") else key.split(".")[-1])


def _group_label(rows: list[dict]) -> list[str]:
  """Per row, the setting that varies most usefully for colouring a scatter."""
  for keys in (("encoding.name",), ("task.num_modules", "task.max_hotness"), ("task.support",),
               ("student.name",)):
    labels = [", ".join(f"{_short(k)}={r.get(k)}" for k in keys) for r in rows]
    if len(set(labels)) > 1:
      return labels
  return [""] * len(rows)


def covariates(rows: list[dict]) -> tuple[np.ndarray, list[str]]:
  """The swept sizes (SIZES that vary across the rows) as columns, and their names."""
  cols, names = [], []
  for key, f, name in SIZES:
    v = [load.number(r.get(key)) for r in rows]
    v = [f(x) if math.isfinite(x) and x > 0 else math.nan for x in v]
    if len({x for x in v if math.isfinite(x)}) > 1:
      cols.append(v)
      names.append(name)
  return np.asarray(cols, np.float64).T.reshape(len(rows), len(cols)), names


def decodability(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str):
  """Scatter of best-layer decodability of z against OOD performance, with Pearson r, the
  partial r given the swept sizes and r per encoding, each with its 95% interval."""
  if not any(TASK_DECODER in r for r in rows):
    return ("No probes in this sweep's workdirs: re-run the sweep command with `--probe` "
            "(finished programs are only probed) for this section."), [verdicts.claim(
                "task decodability correlates strongly with OOD performance", "strong", "-", 0,
                verdicts.NOT_JUDGED, None, "no probes")]
  cov, names = covariates(rows)
  given = ", ".join(names) or "nothing varies"
  parts = [md.claim(paper.CLAIMS["decodability"]),
           md.rules(verdicts.RULES["correlation"] + f" (here given {given})"), ""]
  claims = []
  x = aggregate.values(rows, TASK_DECODER)
  for metric in metrics:
    y = aggregate.values(rows, metric.key)
    plain = verdicts.strong(verdicts.correlation(x, y))
    partial = verdicts.strong(verdicts.correlation(x, y, cov)) if names else None
    parts.append(md.judged(f"strong positive correlation of task decodability with "
                           f"{metric.label} (Pearson r)", plain))
    oks = [plain.ok]
    if partial is not None:
      parts.append(md.judged(f"... and given the swept sizes ({given}; partial r)", partial))
      oks.append(partial.ok)
    per_enc = []
    encodings = sorted({r.get("encoding.name") for r in rows if r.get("encoding.name")})
    if len(encodings) > 1:
      for enc in encodings:
        sub = [r for r in rows if r.get("encoding.name") == enc]
        c_sub, _ = covariates(sub)
        j = verdicts.strong(verdicts.correlation(aggregate.values(sub, TASK_DECODER),
                                                 aggregate.values(sub, metric.key), c_sub))
        per_enc.append(j.ok)
        parts.append(md.judged(f"{enc}: strong correlation within the encoding (partial r "
                               f"given the sizes that vary in it)", j))
    if any(INPUT_DECODER in r for r in rows):
      inp = verdicts.correlation(aggregate.values(rows, INPUT_DECODER), y)
      parts.append(f"- for contrast, input decodability vs {metric.label}: " + (
          f"r = {inp.r:.3f} [{inp.low:.3f}, {inp.high:.3f}] (n = {inp.n})"
          if math.isfinite(inp.r) else f"undefined (no spread or too few runs, n = {inp.n})"))
    fname = f"decodability_{metric.slug}.png"
    ours = f"Pearson {plain.detail}" + (f"; partial given {given}: {partial.detail}"
                                        if partial is not None else "")
    claims.append(verdicts.claim(f"task decodability correlates strongly with {metric.label} "
                                 f"across runs", "strong correlation", ours,
                                 seeds(rows, metric), verdicts.overall(oks), fname,
                                 f"per encoding: {verdicts.count(per_enc)}" if per_enc else ""))
    c = verdicts.correlation(x, y)
    path = plots.scatter_png(
        x, y, os.path.join(out_dir, fname),
        xlabel="task decoder R^2 (best hidden layer, OOD tasks)", ylabel=metric.label,
        title=f"Pearson r = {c.r:.3f} [{c.low:.3f}, {c.high:.3f}] (n = {c.n} runs)",
        groups=_group_label(rows))
    parts.append(md.figure(os.path.basename(path), f"decodability vs {metric.label}",
                           f"one point per run ({c.n} runs)."))
  return "\n".join(parts), claims


def seeds(rows: list[dict], metric: Metric) -> int:
  """The fewest seeds behind any setting (program and n_train)."""
  groups = aggregate.group(rows, ("program", "n_train"), metric.key)
  return min((g.n for g in groups), default=0)

