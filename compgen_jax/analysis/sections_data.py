"""Report sections over the number of training tasks: data scaling per (M, K), and the scaling
law (tasks needed against the total number of tasks, with a fitted power law). Each takes the
sweep's run rows, the metrics (primary first) and the output directory, and returns its
markdown."""

import math
import os

from compgen_jax.analysis import aggregate, figures, paper
from compgen_jax.analysis import markdown as md
from compgen_jax.analysis.aggregate import Metric
from compgen_jax.tasks import combinatorics

MK = ("task.num_modules", "task.max_hotness")
NEAR_ONE = 0.95  # a best mean at least this high counts as approaching 1
# Targets tried for "tasks needed", highest first: the report uses the highest one that every
# student crosses at MIN_POINTS settings or more (so a short CPU run still gets a law).
TARGETS = (0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.55, 0.5)
MIN_POINTS = 3


def _best(means) -> float:
  return max((m for m in means if math.isfinite(m)), default=math.nan)


def _num_tasks(M, K) -> int:
  return combinatorics.num_tasks(int(M), int(K))


def data_scaling(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str) -> str:
  """OOD performance against the number of training tasks: a panel per M, a line per K."""
  parts = [md.claim(paper.CLAIMS["data_scaling"])]
  for metric in metrics:
    curves = aggregate.curves(rows, metric.key, "task.num_modules", "task.max_hotness",
                              "n_train")
    mono, rises, best = [], [], []
    for lines in curves.values():
      for xs, means, _ in lines.values():
        if len(xs) > 1:
          mono.append(aggregate.non_decreasing(means))
          rises.append(bool(means[-1] > means[0]))
        best.append(_best(means))
    parts.append(md.check(f"{metric.label} monotone in n_train (non-decreasing mean at every "
                          f"(M, K))", all(mono) if mono else None,
                          f"{sum(mono)} of {len(mono)} (M, K)"))
    parts.append(md.check(f"{metric.label} higher at the most than at the fewest training tasks",
                          all(rises) if rises else None, f"{sum(rises)} of {len(rises)} (M, K)"))
    parts.append(md.check(f"{metric.label} approaches 1 (best mean >= {NEAR_ONE} at every "
                          f"(M, K))", all(b >= NEAR_ONE for b in best) if best else None,
                          f"best means {min(best):.3f} to {max(best):.3f}" if best else ""))
    panels = [(f"M = {M}", [figures.Series(f"K = {K}", *line) for K, line in lines.items()])
              for M, lines in curves.items()]
    path = figures.curves_png(panels, os.path.join(out_dir, f"data_scaling_{metric.slug}.png"),
                              "number of training tasks", metric.label)
    parts.append(md.figure(os.path.basename(path), f"{metric.label} vs training tasks"))
  keys = (*MK, "n_train")
  groups = {m.key: aggregate.group(rows, keys, m.key) for m in metrics}
  body = [[M, K, _num_tasks(M, K), n, g.rows[0].get("frac_ood"),
           *(md.mean_sd(groups[m.key][i].mean, groups[m.key][i].sd) for m in metrics), g.n]
          for i, g in enumerate(groups[metrics[0].key]) for M, K, n in [g.key]]
  parts.append("\n" + md.table(["M", "K", "T", "n_train", "frac_ood",
                                *(m.label for m in metrics), "seeds"], body))
  return "\n".join(parts)


def tasks_needed(rows: list[dict], metric: str, by: tuple[str, ...], target: float) -> dict:
  """{setting (values of `by`): Crossing} of the mean `metric` over n_train at `target`."""
  out = {}
  for g_key, (xs, means, _) in aggregate.curves_by(rows, metric, by).items():
    out[g_key] = aggregate.first_crossing(xs, means, target)
  return out


def pick_target(rows: list[dict], metric: str, by: tuple[str, ...], per: str) -> float | None:
  """The highest of TARGETS that, for every value of `per`, MIN_POINTS settings cross (not
  merely bound from above)."""
  kinds = {r.get(per) for r in rows}
  for target in TARGETS:
    crossings = tasks_needed(rows, metric, by, target)
    counts = {k: sum(1 for key, c in crossings.items() if key[0] == k and math.isfinite(c.x)
                     and not c.bound) for k in kinds}
    if counts and min(counts.values()) >= MIN_POINTS:
      return target
  return None


def scaling_law(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str) -> str:
  """Tasks needed to reach a target against T(M, K), log-log, with a power law per student."""
  metric = metrics[0]
  by = ("student.name", *MK)
  parts = [md.claim(paper.CLAIMS["scaling_law"])]
  target = pick_target(rows, metric.key, by, "student.name")
  curves = aggregate.curves_by(rows, metric.key, by)
  panels: dict = {}
  for (student, M, K), line in curves.items():
    panels.setdefault(student, []).append(figures.Series(f"M={M}, K={K}", *line))
  path = figures.curves_png([(f"student: {s}", series) for s, series in panels.items()],
                            os.path.join(out_dir, f"scaling_law_curves_{metric.slug}.png"),
                            "number of training tasks", metric.label, hline=target)
  figure_curves = md.figure(os.path.basename(path), "curves")
  if target is None:
    parts.append(md.check("a target reached by enough settings to fit a law", False,
                          f"no target in {TARGETS} is crossed at {MIN_POINTS} (M, K) per student"))
    body = [[s, M, K, _num_tasks(M, K), "-", "-", _best(line[1])]
            for (s, M, K), line in curves.items()]
    return "\n".join([*parts, figure_curves, _law_table(body, metric)])
  crossings = tasks_needed(rows, metric.key, by, target)
  points, fits, body = {}, {}, []
  for (student, M, K), c in crossings.items():
    T = _num_tasks(M, K)
    ts, ns, bounds = points.setdefault(student, ([], [], []))
    if math.isfinite(c.x):
      ts.append(T)
      ns.append(c.x)
      bounds.append(c.bound)
    best = _best(curves[(student, M, K)][1])
    needed = "not reached" if not math.isfinite(c.x) else f"{'<= ' if c.bound else ''}{c.x:.1f}"
    body.append([student, M, K, T, needed, "-" if not math.isfinite(c.x) else c.x / T, best])
  parts.append(f"- target {metric.label} = {target} (the highest of {TARGETS} that every "
               f"student crosses at >= {MIN_POINTS} (M, K); tasks needed interpolated in "
               f"log n_train between the runs' mean curves)")
  for student, (ts, ns, bounds) in points.items():
    keep = [i for i, b in enumerate(bounds) if not b]
    fit = aggregate.fit_power_law([ts[i] for i in keep], [ns[i] for i in keep])
    fits[student] = fit
    frac = aggregate.spearman([ts[i] for i in keep], [ns[i] / ts[i] for i in keep])
    parts.append(md.check(
        f"{student}: tasks needed grow more slowly than T (fitted exponent < 1)",
        bool(fit.exponent < 1) if math.isfinite(fit.exponent) else None,
        f"tasks needed = {fit.prefactor:.3g} T^{fit.exponent:.3f} ± {fit.exponent_se:.3f} "
        f"(s.e.), {fit.n} points"))
    parts.append(md.check(f"{student}: the fraction of tasks needed falls as T grows "
                          f"(Spearman < 0)", bool(frac < 0) if math.isfinite(frac) else None,
                          f"rho = {frac:.3f}"))
  parts += _student_comparison(crossings)
  path = figures.law_png(points, fits, os.path.join(out_dir, f"scaling_law_{metric.slug}.png"),
                         f"training tasks needed for {metric.label} >= {target}")
  parts += [md.figure(os.path.basename(path), "scaling law"), figure_curves, "",
            _law_table(body, metric)]
  return "\n".join(parts)


def _law_table(body: list[list], metric: Metric) -> str:
  return md.table(["student", "M", "K", "T", "tasks needed", "fraction of T",
                   f"best mean {metric.label}"], body)


def _student_comparison(crossings: dict) -> list[str]:
  """Transformer vs MLP tasks needed at the (M, K) both cross."""
  needed = {key: c.x for key, c in crossings.items() if math.isfinite(c.x)}
  shared = [(M, K) for (s, M, K) in needed if s == "transformer" and ("mlp", M, K) in needed]
  if not shared:
    return []
  fewer = [needed[("transformer", M, K)] < needed[("mlp", M, K)] for M, K in shared]
  return [md.check("the transformer needs fewer training tasks than the MLP", all(fewer),
                   f"at {sum(fewer)} of {len(fewer)} shared (M, K)")]
