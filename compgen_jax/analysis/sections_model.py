"""Report sections over model settings: model size and decodability vs generalization (the
encoding table and the encoding-nonlinearity check: sections_encodings.py). Each takes the
sweep's run rows, the metrics (primary first) and the output directory, and returns its
markdown and its claims (claims.claim records)."""

import math
import os

from compgen_jax.analysis import (
  aggregate,
  correlations,
  figures,
  load,
  paper,
  plots,
  readings,
  sections_data,
  verdicts,
)
from compgen_jax.analysis import claims as claims_table
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


def model_size(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str):
  """OOD performance against width (one panel per encoding, a line per depth)."""
  keys = ("encoding.name", "student.mlp.depth", "student.mlp.width")
  parts = [md.claim(paper.CLAIMS["model_size"]),
           md.rules(verdicts.RULES["seeds"], verdicts.RULES["rises"], verdicts.RULES["per_seed"],
                    verdicts.RULES["trend"], verdicts.RULES["holm"], verdicts.RULES["fits"],
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
        if len(c.x) > 1:  # a depth swept at one width says nothing about width
          t = readings.trend([g.rows for g in c.groups], metric)
          wider.append(t)
          table.append([enc, f"depth {depth}", "width", c.seeds, md.word(t.judgement.ok),
                        t.judgement.detail, md.fmt(aggregate.gain_per_doubling(c.x, c.mean)),
                        md.reach(aggregate.reach_at_last_gain(c.x, c.mean, GENERALIZES), c.x)])
    for enc, lines in by_width.items():
      for width, c in lines.items():
        if len(c.x) > 1:
          t = readings.trend([g.rows for g in c.groups], metric)
          deeper.append(t)
          table.append([enc, f"width {width}", "depth", c.seeds, md.word(t.judgement.ok),
                        t.judgement.detail, "-", "-"])
    seeds = min((c.seeds for lines in curves.values() for c in lines.values()), default=0)
    fname = f"model_size_{metric.slug}.png"
    fit_line = md.fits_check(rows, metric, verdicts.FITS_ID)
    note = readings.fits_note(rows, metric.id_key)
    parts.append(fit_line)
    for axis, oks, over in (("width", wider, "encoding and depth"),
                            ("depth", deeper, "encoding and width")):
      if not oks:  # the sweep does not vary this axis: no claim about it
        continue
      word, counted = readings.trend_verdict(oks)
      parts.append(md.verdict(f"{metric.label} rises with {axis} at every {over}", word,
                              counted))
      claims.append(claims_table.claim(f"{metric.label} rises with the student's {axis}, for "
                                       f"every encoding", "rises", f"{counted} "
                                       f"({n_seeds(seeds)})", seeds, word, fname, note,
                                       composition=readings.composition(rows, metric),
                                       against_paper=readings.paper_direction(word),
                                       rules=("rises_scale", "trend")))
    parts += ["", md.table(["encoding", "at", "over", "seeds", "rises",
                            "detail (95% intervals)", "gain per doubling (last)",
                            f"width to {GENERALIZES} (extrapolated)"], table)]
    panels = [(f"encoding: {enc}", [sections_data.series(f"depth {d}", c,
                                                         ids.get(enc, {}).get(d), metric.key)
                                    for d, c in lines.items()])
              for enc, lines in curves.items()]
    path = figures.curves_png(panels, os.path.join(out_dir, fname), "MLP width", metric.label,
                              xscale="log2", chance=metric.chance, title=figures.caption(seeds))
    parts.append(md.figure(os.path.basename(path), f"{metric.label} vs width",
                           f"{metric.label} (solid) and ID (dashed) against width; "
                           f"{figures.caption(seeds)}; dots: each seed."))
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
  for keys in (("student.mlp.width",), ("encoding.name",),
               ("task.num_modules", "task.max_hotness"), ("task.support",), ("student.name",)):
    labels = [", ".join(f"{_short(k)}={r.get(k)}" for k in keys) for r in rows]
    if len(set(labels)) > 1:
      return labels
  return [""] * len(rows)


DECODABILITY_R = 0.975  # the paper: decodability explains R^2 > 0.95 of OOD performance
CLUSTER = ("program", "seed")  # runs of one program and seed share their teacher and split


def _given_id(rows: list[dict], metric: Metric) -> correlations.Correlation:
  """Partial r of task decodability with OOD given ID, clustered bootstrap interval."""
  return correlations.clustered(aggregate.values(rows, TASK_DECODER),
                                aggregate.values(rows, metric.key),
                                [tuple(r.get(k) for k in CLUSTER) for r in rows],
                                aggregate.values(rows, metric.id_key))


def decodability(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str):
  """Scatter of best-layer decodability of z against OOD performance: Pearson r beside the
  partial r given ID (the verdict: fit removed), per width and per encoding, with 95% intervals
  from a bootstrap over (program, seed) clusters."""
  if not any(TASK_DECODER in r for r in rows):
    return ("No probes in this sweep's workdirs: re-run the sweep command with `--probe` "
            "(finished programs are only probed) for this section."), [claims_table.claim(
                "task decodability correlates strongly with OOD performance", "strong", "-", 0,
                verdicts.NOT_JUDGED, None, "no probes", composition="no probes",
                against_paper="no probes", rules=("decodability",))]
  parts = [md.claim(paper.CLAIMS["decodability"]),
           md.rules(verdicts.RULES["correlation"] + " (here: the partial r given the run's ID "
                    "metric, so that a correlation carried by how well the students fit does "
                    "not count as one with composition)", f"intervals: {BOOTSTRAP} over "
                    f"(program, seed) clusters", f"beside it, per width (the confound that "
                    f"moves fit and decodability together) and per encoding; against the "
                    f"paper: whether the plain r interval reaches {DECODABILITY_R} (R^2 0.95)"),
           ""]
  claims = []
  x = aggregate.values(rows, TASK_DECODER)
  clusters = [tuple(r.get(k) for k in CLUSTER) for r in rows]
  for metric in metrics:
    y = aggregate.values(rows, metric.key)
    plain = correlations.clustered(x, y, clusters)
    given = _given_id(rows, metric)
    verdict_j = correlations.strong(given)
    gap = correlations.clustered(x, aggregate.gaps(rows, metric), clusters)
    parts.append(f"- Pearson r of task decodability with {metric.label}: "
                 f"{correlations.text(plain)}")
    parts.append(md.judged(f"strong positive correlation given ID (partial r of task "
                           f"decodability with {metric.label} given "
                           f"{metric.label.replace('OOD', 'ID')})", verdict_j))
    parts.append(f"- decodability against the gap ID - OOD: {correlations.text(gap)}")
    per = []
    for label, key in (("width", "student.mlp.width"), ("encoding", "encoding.name")):
      values = sorted({r.get(key) for r in rows if r.get(key) is not None}, key=str)
      if len(values) > 1:
        for v in values:
          c = _given_id([r for r in rows if r.get(key) == v], metric)
          per.append(f"{label} {v}: {correlations.text(c)}")
    if per:
      parts.append("- partial r given ID within each " + "; ".join(per))
    if any(INPUT_DECODER in r for r in rows):
      inp = correlations.correlation(aggregate.values(rows, INPUT_DECODER), y)
      parts.append(f"- for contrast, input decodability vs {metric.label}: " + (
          f"r = {inp.r:.3f} [{inp.low:.3f}, {inp.high:.3f}] (n = {inp.n})"
          if math.isfinite(inp.r) else f"undefined (no spread or too few runs, n = {inp.n})"))
    fname = f"decodability_{metric.slug}.png"
    reaches = math.isfinite(plain.r) and plain.high >= DECODABILITY_R
    claims.append(claims_table.claim(
        f"task decodability correlates strongly with {metric.label} across runs",
        "strong correlation (R^2 > 0.95)",
        f"Pearson {correlations.text(plain)}; given ID: {correlations.text(given)}",
        seeds(rows, metric), verdicts.word(verdict_j.ok), fname,
        "; ".join(per), composition=f"partial r given ID {correlations.text(given)}; r with "
        f"the gap ID - OOD {correlations.text(gap)}",
        against_paper=f"plain r {'reaches' if reaches else 'does not reach'} "
        f"{DECODABILITY_R} (R^2 0.95); {readings.NOT_TESTABLE_YET}: these runs move fit and "
        f"composition together; R^2 > 0.95 at fixed fit: the decodability_fit sweep",
        rules=("decodability",)))
    c = correlations.correlation(x, y)
    path = plots.scatter_png(
        x, y, os.path.join(out_dir, fname),
        xlabel="task decoder R^2 (best hidden layer, OOD tasks)", ylabel=metric.label,
        title=f"Pearson r = {c.r:.3f}; given ID {given.r:.3f} (n = {c.n} runs)",
        groups=_group_label(rows))
    parts.append(md.figure(os.path.basename(path), f"decodability vs {metric.label}",
                           f"one point per run ({c.n} runs), coloured by width where widths "
                           f"vary."))
  return "\n".join(parts), claims


BOOTSTRAP = (f"95% percentile interval of {correlations.BOOTSTRAP_DRAWS} bootstrap resamples "
             f"of whole clusters, not judged with fewer than {correlations.MIN_CLUSTERS} "
             f"clusters")


def seeds(rows: list[dict], metric: Metric) -> int:
  """The fewest seeds behind any setting (program and n_train)."""
  groups = aggregate.group(rows, ("program", "n_train"), metric.key)
  return min((g.n for g in groups), default=0)

