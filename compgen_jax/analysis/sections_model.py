"""Report sections over model settings: model size, the encoding table beside the paper's,
decodability vs generalization, and per-layer decodability of failing vs succeeding runs. Each
takes the sweep's run rows, the metrics (primary first) and the output directory, and returns
its markdown and its claims (verdicts.claim records)."""

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


def _table_model(rows: list[dict]) -> tuple[int, int]:
  """(width, depth) of the paper's table model if swept, else the deepest, then widest."""
  models = {(r.get("student.mlp.width"), r.get("student.mlp.depth")) for r in rows}
  wanted = (paper.TABLE_MODEL["student.mlp.width"], paper.TABLE_MODEL["student.mlp.depth"])
  return wanted if wanted in models else max(models, key=lambda m: (m[1] or 0, m[0] or 0))


def encoding_table(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str):
  """Per encoding: task decoder, input decoder and OOD R^2, ours beside the paper's."""
  rows = [r for r in rows if r.get("encoding.name") in paper.ENCODING_TABLE]
  metric = metrics[0]
  if not rows or metric.key != "ood/r2":
    return "", []
  width, depth = _table_model(rows)
  rows = [r for r in rows
          if (r.get("student.mlp.width"), r.get("student.mlp.depth")) == (width, depth)]
  setting = {k: rows[0].get(k) for k in paper.TABLE_SETTING}
  fname = "encoding_table.png"
  body, claims, checks, bars, seeds_all = [], [], [], {}, []
  for enc, (name, p_task, p_input, p_ood) in paper.ENCODING_TABLE.items():
    mine = [r for r in rows if r["encoding.name"] == enc]
    if not mine:
      continue
    stats = {k: aggregate.summarize(aggregate.values(mine, k))
             for k in (TASK_DECODER, INPUT_DECODER, "ood/r2")}
    seeds = stats["ood/r2"][2]
    seeds_all.append(seeds)
    gen = verdicts.at_least(aggregate.values(mine, "ood/r2"), GENERALIZES)
    dec = verdicts.at_least(aggregate.values(mine, TASK_DECODER), GENERALIZES)
    checks.append(md.judged(f"{enc}: generalizes (OOD R^2 >= {GENERALIZES})", gen))
    checks.append(md.judged(f"{enc}: z decodable from the hidden layers (task decoder R^2 >= "
                            f"{GENERALIZES})", dec))
    ours = {k: md.mean_sd(*v[:2]) for k, v in stats.items()}
    claims.append(verdicts.claim(
        f"{name}: generalizes (OOD R^2 >= {GENERALIZES}) with z decodable from the hidden "
        f"layers (task decoder R^2 >= {GENERALIZES})",
        f"OOD {p_ood:.2f}, task decoder {p_task:.2f}, input decoder {p_input:.2f}",
        f"OOD {ours['ood/r2']}, task decoder {ours[TASK_DECODER]}, input decoder "
        f"{ours[INPUT_DECODER]} ({n_seeds(seeds)})", seeds, verdicts.overall([gen.ok, dec.ok]),
        fname, f"MLP {depth}x{width}, M={setting['task.num_modules']}, "
        f"K={setting['task.max_hotness']}, frac_ood={setting['frac_ood']}"))
    bars[name] = [figures.Bar(label, v[0], v[1], v[2], paper=p)
                  for label, v, p in (("OOD R^2", stats["ood/r2"], p_ood),
                                      ("task decoder R^2", stats[TASK_DECODER], p_task),
                                      ("input decoder R^2", stats[INPUT_DECODER], p_input))]
    body.append([f"{name} (`{enc}`)", p_task, ours[TASK_DECODER], p_input, ours[INPUT_DECODER],
                 p_ood, *md.cells(mine, metric)])
  seeds = min(seeds_all, default=0)
  figures.bars_png(list(bars), bars, os.path.join(out_dir, fname), "R^2",
                   f"ours (bars, {figures.caption(seeds)}); paper (diamonds)")
  parts = [md.claim(paper.CLAIMS["encodings"]),
           md.rules(verdicts.RULES["level"] + f" (here {GENERALIZES})", verdicts.RULES["fits"]),
           "", md.fits_check(rows, metric, verdicts.FITS_ID), *checks,
           *_distances(body),
           f"\nOurs: MLP {depth}x{width}, M={setting['task.num_modules']}, "
           f"K={setting['task.max_hotness']}, frac_ood={setting['frac_ood']} (paper: M=16, K=3, "
           f"frac_ood=0.25, its default MLP 4x1024); mean ± s.d. over seeds.\n",
           md.table(["encoding", "task decoder R^2 (paper)", "task decoder R^2 (ours)",
                     "input decoder R^2 (paper)", "input decoder R^2 (ours)",
                     "OOD R^2 (paper)", *(f"{h} (ours)" for h in md.cell_header(metric))], body),
           md.figure(fname, "encoding table", f"ours as bars ({figures.caption(seeds)}), the "
                     f"paper's values as black diamonds.")]
  return "\n".join(parts), claims


def _distances(body: list[list]) -> list[str]:
  """The largest |ours - paper| per column of the encoding table."""
  lines = []
  for label, p_col, o_col in (("task decoder R^2", 1, 2), ("input decoder R^2", 3, 4),
                              ("OOD R^2", 5, 7)):
    diffs = {}
    for row in body:
      ours = load.number(str(row[o_col]).split(" ")[0])
      if math.isfinite(ours):
        diffs[row[0]] = abs(ours - row[p_col])
    if diffs:
      enc = max(diffs, key=diffs.get)
      lines.append(f"- largest |ours - paper| in {label}: {diffs[enc]:.3f} ({enc})")
  return lines


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


SCALE = "encoding.inn_init_scale"
NONLINEARITY_QUESTION = (
    "**Question (not a claim of the paper):** how much does the invertible-NN row depend on how "
    "nonlinear the encoding is? The paper reports an input-decoder R^2 of 0.56 for it; ours is "
    "calibrated to that by the scale of its coupling layers' initial weights "
    "(`encoding.inn_init_scale`, docs/evaluation.md), while the reference code's scale, 0.1, "
    "gives a nearly linear encoding. If the row's OOD R^2 falls as the input decoder falls, its "
    "value at this scale rests on that calibration.\n")


def encoding_nonlinearity(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str):
  """OOD and ID against the invertible encoding's init scale, beside its input decoder (how
  linearly z is read off phi(z)) and task decoder; the correlation of input-decoder R^2 with
  OOD across runs."""
  rows = [r for r in rows if r.get(SCALE) is not None]
  metric = metrics[0]
  if not rows:
    return "", []
  parts = [NONLINEARITY_QUESTION, md.rules(verdicts.RULES["seeds"], verdicts.RULES["fits"],
                                           verdicts.RULES["correlation"]), ""]
  parts.append(md.fits_check(rows, metric, verdicts.FITS_ID))
  probed = [r for r in rows if INPUT_DECODER in r]
  if probed:
    c = verdicts.correlation(aggregate.values(probed, INPUT_DECODER),
                             aggregate.values(probed, metric.key))
    parts.append(md.judged(f"{metric.label} falls with the encoding's linear decodability "
                           f"(strong positive Pearson r of input-decoder R^2 with "
                           f"{metric.label} across runs)", verdicts.strong(c)))
  body = [[*g.key, *(md.mean_sd(*aggregate.summarize(aggregate.values(g.rows, k))[:2])
                     for k in (INPUT_DECODER, TASK_DECODER)), *md.cells(g.rows, metric), g.n]
          for g in aggregate.group(rows, ("encoding.name", SCALE), metric.key)]
  parts += ["", md.table(["encoding", "inn_init_scale", "input decoder R^2", "task decoder R^2",
                          *md.cell_header(metric), "seeds"], body)]
  curves = aggregate.curves_by(rows, metric.key, ("encoding.name",), SCALE)
  ids = aggregate.curves_by(rows, metric.id_key, ("encoding.name",), SCALE)
  seeds = min((c.seeds for c in curves.values()), default=0)
  fname = f"nonlinearity_{metric.slug}.png"
  path = figures.curves_png(
      [(f"encoding: {k[0]}", [sections_data.series(f"{k[0]}", c, ids.get(k))])
       for k, c in curves.items()], os.path.join(out_dir, fname),
      "inn_init_scale (larger: less linearly decodable)", metric.label, xscale="linear",
      chance=metric.chance, title=figures.caption(seeds))
  parts.append(md.figure(os.path.basename(path), f"{metric.label} vs inn_init_scale",
                         f"{metric.label} (solid) and ID (dashed) against the encoding's init "
                         f"scale; {figures.caption(seeds)}."))
  return "\n".join(parts), []
