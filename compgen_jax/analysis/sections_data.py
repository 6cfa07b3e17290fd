"""Report sections over the number of training tasks: data scaling per (M, K), and what the
scaling law (sections_law.py) and the student comparison read of it: OOD / ID, tasks needed and
their per-seed comparison. Each section takes the sweep's run rows, the metrics (primary first)
and the output directory, and returns its markdown and its claims (claims.claim records)."""

import math
import os

from compgen_jax.analysis import aggregate, figures, paper, readings, verdicts
from compgen_jax.analysis import claims as claims_table
from compgen_jax.analysis import markdown as md
from compgen_jax.analysis.aggregate import Metric
from compgen_jax.analysis.verdicts import n_seeds
from compgen_jax.tasks import combinatorics

MK = ("task.num_modules", "task.max_hotness")
NEAR_ONE = 0.95  # a mean at the most training tasks at least this high counts as approaching 1
# "Tasks needed" is fixed before the data, relative to how well the student fits: the number of
# training tasks at which the seed mean of OOD / ID reaches TARGET_OF_ID (interpolated in log
# n_train), so a short CPU run is judged on its generalization gap, not on its underfit.
TARGET_OF_ID = 0.9
# The same law with an absolute target (the encoding table's "generalizes"): a relative target
# eases where ID falls, so the law must hold under both.
ABSOLUTE_TARGET = 0.9
RATIO = "_ood_over_id"  # the derived row key of OOD / ID


def num_tasks(M, K) -> int:
  return combinatorics.num_tasks(int(M), int(K))


def series(label: str, curve: aggregate.Curve, id_curve: aggregate.Curve | None,
           key: str | None = None) -> figures.Series:
  """A figure's line of a curve, with the ID curve of the same settings dashed beside it (and,
  given the metric's `key`, each seed's value as a dot)."""
  same = id_curve is not None and id_curve.x == curve.x and any(
      math.isfinite(m) for m in id_curve.mean)
  return figures.Series(label, curve.x, curve.mean, curve.sd, curve.seeds,
                        id_curve.mean if same else None, id_curve.sd if same else None,
                        [aggregate.values(g.rows, key) for g in curve.groups] if key else None)


MODEL_KEYS = (("student.mlp.width", "width"), ("student.mlp.depth", "depth"))


def varying(rows: list[dict]) -> tuple[tuple[str, str], ...]:
  """The MODEL_KEYS that take more than one value (a scale trend inside a data sweep): curves
  are kept apart by them, never pooled."""
  return tuple((k, name) for k, name in MODEL_KEYS if len({r.get(k) for r in rows}) > 1)


def _line_label(key: tuple, models: tuple) -> str:
  """'K = 3' or 'K = 3, width 32' from a curve's key (M, K, *model values)."""
  return ", ".join([f"K = {key[1]}", *(f"{name} {v}" for (_, name), v in zip(models, key[2:],
                                                                              strict=True))])


def data_scaling(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str):
  """OOD performance against the number of training tasks: a panel per M, a line per K (and
  per width / depth where those vary), and the width trend where widths vary."""
  models = varying(rows)
  by = (*MK, *(k for k, _ in models))
  parts = [md.claim(paper.CLAIMS["data_scaling"]),
           md.rules(verdicts.RULES["seeds"], verdicts.RULES["rises"], verdicts.RULES["per_seed"],
                    verdicts.RULES["trend"], verdicts.RULES["holm"], verdicts.RULES["level"]
                    + f" (approaching 1: {NEAR_ONE}, at the most training tasks)",
                    verdicts.RULES["reaches"], verdicts.RULES["fits"]), ""]
  claims = []
  for metric in metrics:
    curves = aggregate.curves_by(rows, metric.key, by)
    ids = aggregate.curves_by(rows, metric.id_key, by)
    rising, near, table, lasts = [], [], [], []
    for key, c in curves.items():
      up = readings.trend([g.rows for g in c.groups], metric)
      last = verdicts.at_least(aggregate.values(c.groups[-1].rows, metric.key), NEAR_ONE)
      rising.append(up)
      near.append(last)
      lasts.append(c.mean[-1])
      table.append([*key, len(c.x), c.seeds, md.word(up.judgement.ok), up.judgement.detail,
                    md.word(last.ok)])
    seeds = min((c.seeds for c in curves.values()), default=0)
    fname = f"data_scaling_{metric.slug}.png"
    word, counted = readings.trend_verdict(rising)
    word_near = verdicts.overall(near)
    setting = "(M, K" + "".join(f", {name}" for _, name in models) + ")"
    parts += [md.fits_check(rows, metric, verdicts.FITS_ID),
              md.verdict(f"{metric.label} rises with n_train at every {setting}", word, counted),
              md.verdict(f"{metric.label} approaches 1 (>= {NEAR_ONE} at the most training "
                         f"tasks, every {setting})", word_near, verdicts.count(near))]
    note = readings.fits_note(rows, metric.id_key)
    most = [r for c in curves.values() for r in c.groups[-1].rows]
    best = max(curves.values(), key=lambda c: c.mean[-1])
    claims += [claims_table.claim(f"{metric.label} rises monotonically with the number of training "
                                  f"tasks at every {setting}", "rises monotonically",
                                  f"{counted} ({n_seeds(seeds)})", seeds, word,
                                  fname, note, composition="at the most tasks: "
                                  + readings.composition(most, metric),
                                  against_paper=readings.paper_direction(word),
                                  rules=("rises_tasks", "trend")),
               claims_table.claim(f"{metric.label} approaches 1 with enough training tasks",
                                  "-> 1", f"{_span(lasts)} at the most tasks ({n_seeds(seeds)})",
                                  seeds, word_near, fname, note, composition="at the most tasks: "
                                  + readings.composition(most, metric),
                                  against_paper="best setting at the most tasks, "
                                  + readings.against_value(
                                      aggregate.values(best.groups[-1].rows, metric.key),
                                      aggregate.values(best.groups[-1].rows, metric.id_key), 1.0,
                                      metric.bounds), rules=("near_one", "reaches"))]
    if any(k == "student.mlp.width" for k, _ in models):
      parts.append(_width_trend(rows, metric, fname, claims))
    parts += ["", md.table(["M", "K", *(name for _, name in models), "points", "seeds", "rises",
                            "detail (95% intervals)", f">= {NEAR_ONE} at the most tasks"],
                           table)]
    panels: dict = {}
    for key, c in curves.items():
      panels.setdefault(key[0], []).append(series(_line_label(key, models), c, ids.get(key),
                                                  metric.key))
    path = figures.curves_png([(f"M = {M}", ss) for M, ss in panels.items()],
                              os.path.join(out_dir, fname), "number of training tasks",
                              metric.label, chance=metric.chance, title=figures.caption(seeds))
    parts.append(md.figure(os.path.basename(path), f"{metric.label} vs training tasks",
                           f"{metric.label} (solid) and ID (dashed) against the number of "
                           f"training tasks; {figures.caption(seeds)}; dots: each seed (the "
                           f"rising rule asks every seed's curve to rise)."))
  first = aggregate.group(rows, (*by, "n_train"), metrics[0].key)
  body = [[*g.key[:2], num_tasks(*g.key[:2]), *g.key[2:], g.rows[0].get("frac_ood"),
           *(c for m in metrics for c in md.cells(g.rows, m)), g.n] for g in first]
  parts.append("\n" + md.table(["M", "K", "T", *(name for _, name in models), "n_train",
                                "frac_ood", *(h for m in metrics for h in md.cell_header(m)),
                                "seeds"], body))
  return "\n".join(parts), claims


def _span(means: list[float]) -> str:
  """'mean 0.348' or 'means 0.348 to 0.811' ('-' with none)."""
  finite = [m for m in means if math.isfinite(m)]
  if not finite:
    return "-"
  lo, hi = min(finite), max(finite)
  return f"mean {lo:.3f}" if len(finite) == 1 else f"means {lo:.3f} to {hi:.3f}"


def _width_trend(rows: list[dict], metric: Metric, fname: str, claims: list) -> str:
  """The scale trend inside a data sweep: rises with width at each (M, K, n_train) that has
  more than one width (appends its claim)."""
  curves = aggregate.curves_by(rows, metric.key, (*MK, "n_train"), "student.mlp.width")
  trends = [readings.trend([g.rows for g in c.groups], metric)
            for c in curves.values() if len(c.x) > 1]
  seeds = min((c.seeds for c in curves.values() if len(c.x) > 1), default=0)
  word, counted = readings.trend_verdict(trends)
  claims.append(claims_table.claim(f"{metric.label} rises with the student's width (at each "
                                   f"(M, K, n_train) with several widths)", "rises",
                                   f"{counted} ({n_seeds(seeds)})", seeds, word, fname,
                                   readings.fits_note(rows, metric.id_key) + "; " + "; ".join(
                                       f"M={k[0]}, K={k[1]}, n_train={k[2]}: {t.judgement.detail}"
                                       for k, t in zip([k for k, c in curves.items()
                                                        if len(c.x) > 1], trends, strict=True)),
                                   composition=readings.composition(rows, metric),
                                   against_paper=readings.paper_direction(word),
                                   rules=("rises_scale", "trend")))
  return md.verdict(f"{metric.label} rises with width at every (M, K, n_train) with several "
                    f"widths", word, counted)


def with_ratio(rows: list[dict], metric: Metric) -> list[dict]:
  """Rows with RATIO = OOD / ID (NaN where ID is missing or not positive)."""
  out = []
  for r, o, i in zip(rows, aggregate.values(rows, metric.key),
                     aggregate.values(rows, metric.id_key), strict=True):
    out.append({**r, RATIO: o / i if i > 0 else math.nan})
  return out


def tasks_needed(rows: list[dict], by: tuple[str, ...]) -> dict:
  """{setting: Crossing} of the seed-mean OOD / ID curve over n_train at TARGET_OF_ID (rows
  from with_ratio)."""
  return {k: aggregate.first_crossing(c.x, c.mean, TARGET_OF_ID)
          for k, c in aggregate.curves_by(rows, RATIO, by).items()}


def per_seed_needed(rows: list[dict], by: tuple[str, ...]) -> dict:
  """{setting: [Crossing of each seed's own OOD / ID curve]} (rows from with_ratio; x NaN: that
  seed never reaches TARGET_OF_ID)."""
  out: dict = {}
  for key, c in tasks_needed(rows, (*by, "seed")).items():
    out.setdefault(key[:-1], []).append(c)
  return out


def fewer_needed(a: list[aggregate.Crossing], b: list[aggregate.Crossing]
                 ) -> verdicts.Judgement:
  """Setting a needs clearly fewer training tasks than b (per-seed crossings). Both reached at
  every seed: log tasks needed compared as `verdicts.lower`. A seed that never reaches the
  target needs more than the most tasks sampled, so a reaching at every seed and b at none is
  a yes, the reverse a no; a mix, or b already above at its fewest tasks (only an upper
  bound), cannot be ordered: not judged."""
  if min(len(a), len(b)) < verdicts.MIN_SEEDS:
    return verdicts.ONE_SEED
  reached_a, reached_b = ([math.isfinite(c.x) for c in s] for s in (a, b))
  if any(c.bound for c in b):
    return verdicts.Judgement(None, "the second reaches it at its fewest tasks (upper bound)")
  if all(reached_a) and all(reached_b):
    return verdicts.lower([math.log(c.x) for c in a], [math.log(c.x) for c in b])
  if all(reached_a) and not any(reached_b):
    return verdicts.Judgement(True, f"reached by {len(a)} of {len(a)} seeds vs 0 of {len(b)}")
  if not any(reached_a) and all(reached_b):
    return verdicts.Judgement(False, f"reached by 0 of {len(a)} seeds vs {len(b)} of {len(b)}")
  return verdicts.Judgement(None, f"reached by {sum(reached_a)} of {len(a)} seeds vs "
                                  f"{sum(reached_b)} of {len(b)}")
