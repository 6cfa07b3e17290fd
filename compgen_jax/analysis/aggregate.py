"""Numbers behind the sweep report: per-setting mean and spread over seeds, curves over an axis,
the first crossing of a target and power-law fits (one line, or one slope across groups). Plain
numpy on run rows (the rules that turn them into verdicts are in verdicts.py)."""

import math
from typing import NamedTuple

import numpy as np

from compgen_jax.analysis import load


class Group(NamedTuple):
  key: tuple  # the values of the grouping keys
  mean: float  # over the runs (seeds) of the group, NaN runs skipped
  sd: float  # sample standard deviation over seeds (0 with one seed)
  n: int  # finite runs
  rows: list  # the group's rows


def summarize(values) -> tuple[float, float, int]:
  """(mean, sample s.d., count) of the finite values; (nan, nan, 0) when there are none."""
  x = np.asarray([load.number(v) for v in values], np.float64)
  x = x[np.isfinite(x)]
  if not x.size:
    return math.nan, math.nan, 0
  return float(x.mean()), float(x.std(ddof=1)) if x.size > 1 else 0.0, int(x.size)


def group(rows: list[dict], keys: tuple[str, ...], metric: str) -> list[Group]:
  """Rows grouped by `keys` (sorted by them), with the mean and s.d. of `metric` over each."""
  buckets: dict[tuple, list] = {}
  for row in rows:
    buckets.setdefault(tuple(row.get(k) for k in keys), []).append(row)
  out = []
  first: dict = {}  # non-numbers keep the order the rows give them
  for key in buckets:
    for i, v in enumerate(key):
      first.setdefault((i, v), len(first))
  for key in sorted(buckets, key=lambda k: _sort_key(k, first)):
    mean, sd, n = summarize(r.get(metric) for r in buckets[key])
    out.append(Group(key, mean, sd, n, buckets[key]))
  return out


def _sort_key(key: tuple, first: dict) -> tuple:
  return tuple((0, v) if isinstance(v, int | float) and not isinstance(v, bool)
               else (1, first[(i, v)]) for i, v in enumerate(key))


def gain_per_doubling(x: list, mean: list) -> float:
  """The gain of `mean` per doubling of `x` between the last two points (NaN with fewer)."""
  if len(x) < 2:
    return math.nan
  return (mean[-1] - mean[-2]) / math.log2(x[-1] / x[-2])


def reach_at_last_gain(x: list, mean: list, bar: float) -> float:
  """Where `mean` (over increasing `x`: training steps, a width) reaches `bar`: the first measured
  point already at it, else past the last point at the last doubling's gain (linear in log2 x;
  an extrapolation); inf when that gain is not positive, NaN with fewer than two points."""
  for xi, m in zip(x, mean, strict=True):
    if m >= bar:
      return float(xi)
  gain = gain_per_doubling(x, mean)
  if math.isnan(gain):
    return math.nan
  return math.inf if gain <= 0 else float(x[-1] * 2 ** ((bar - mean[-1]) / gain))


class Crossing(NamedTuple):
  x: float  # where the curve first reaches the target (NaN: never)
  bound: bool  # True: already reached at the smallest x, so x is an upper bound


def first_crossing(x, y, target: float) -> Crossing:
  """The smallest x at which y (a curve over increasing x) reaches `target`, interpolating
  linearly in log x between the last point below and the first point at or above it."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  order = np.argsort(x)
  x, y = x[order], y[order]
  above = np.flatnonzero(np.isfinite(y) & (y >= target))
  if not above.size:
    return Crossing(math.nan, False)
  i = int(above[0])
  if i == 0 or not np.isfinite(y[i - 1]):
    return Crossing(float(x[i]), True)
  t = (target - y[i - 1]) / (y[i] - y[i - 1])
  return Crossing(float(np.exp(np.log(x[i - 1]) + t * (np.log(x[i]) - np.log(x[i - 1])))), False)


class PowerLaw(NamedTuple):
  exponent: float  # b in y = a * x^b
  prefactor: float  # a
  exponent_se: float  # standard error of b (NaN with 2 points)
  n: int


def fit_power_law(x, y) -> PowerLaw:
  """Least squares of log y = log a + b log x over the positive finite pairs (needs >= 2)."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
  lx, ly = np.log(x[ok]), np.log(y[ok])
  n = int(lx.size)
  if n < 2 or np.ptp(lx) == 0:
    return PowerLaw(math.nan, math.nan, math.nan, n)
  b, a = np.polyfit(lx, ly, 1)
  se = math.nan
  if n > 2:
    resid = ly - (a + b * lx)
    se = float(np.sqrt(resid @ resid / (n - 2) / np.sum((lx - lx.mean()) ** 2)))
  return PowerLaw(float(b), float(np.exp(a)), se, n)


class SharedSlope(NamedTuple):
  exponent: float  # b in log y = a_g + b log x, one intercept a_g per group
  exponent_se: float  # standard error of b (NaN without a residual degree of freedom)
  dof: int  # residual degrees of freedom: points - groups - 1
  ratios: dict  # group -> exp(a_g - a_first): y at equal x relative to the first group
  ratio_se: dict  # group -> standard error of a_g - a_first (log scale)


def fit_shared_slope(x, y, groups) -> SharedSlope:
  """Least squares of log y = a_g + b log x over the positive finite pairs: one slope, one
  intercept per group (its key sorted; the first is the reference of `ratios`)."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
  keys = sorted({g for g, k in zip(groups, ok, strict=True) if k})
  g = [keys.index(gi) for gi, k in zip(groups, ok, strict=True) if k]
  lx, ly = np.log(x[ok]), np.log(y[ok])
  design = np.column_stack([lx, np.eye(len(keys))[g]]) if keys else np.zeros((0, 1))
  dof = int(lx.size) - len(keys) - 1
  if dof < 0 or np.linalg.matrix_rank(design) < design.shape[1]:
    return SharedSlope(math.nan, math.nan, max(dof, 0), {}, {})
  coef, *_ = np.linalg.lstsq(design, ly, rcond=None)
  cov = np.full((design.shape[1],) * 2, math.nan)
  if dof > 0:
    resid = ly - design @ coef
    cov = resid @ resid / dof * np.linalg.inv(design.T @ design)
  ratios = {k: float(np.exp(coef[1 + i] - coef[1])) for i, k in enumerate(keys)}
  ratio_se = {k: float(np.sqrt(cov[1 + i, 1 + i] + cov[1, 1] - 2 * cov[1, 1 + i]))
              for i, k in enumerate(keys)}
  return SharedSlope(float(coef[0]), float(np.sqrt(cov[0, 0])), dof, ratios, ratio_se)


class Metric(NamedTuple):
  key: str  # row key, e.g. "ood/r2"
  label: str  # axis and column label
  slug: str  # in file names
  id_key: str = ""  # the same metric on training (ID) tasks, e.g. "id/r2"
  chance: float | None = None  # a guessing student's value, drawn in figures where known
  # the values the metric can take (R^2 at most 1; accuracies in [0, 1]): an interval of its
  # seed mean is held inside them (readings.py), as no seed mean can leave them
  bounds: tuple[float, float] = (-math.inf, 1.0)


def values(rows: list[dict], key: str) -> list[float]:
  """`key` of each row as a float (NaN where missing)."""
  return [load.number(r.get(key)) for r in rows]


def by_seed(rows: list[dict], key: str) -> dict | list[float]:
  """{seed: `key` as a float} of a group's rows, one per seed; the plain values (unpaired) when
  a seed repeats or is missing."""
  seeds = [r.get("seed") for r in rows]
  if None in seeds or len(set(seeds)) != len(seeds):
    return values(rows, key)
  return dict(zip(seeds, values(rows, key), strict=True))


def gaps(rows: list[dict], metric: Metric) -> list[float]:
  """ID minus OOD per run: a large gap is a generalization gap, a low ID an underfit."""
  return [i - o for i, o in zip(values(rows, metric.id_key), values(rows, metric.key),
                                strict=True)]


class Curve(NamedTuple):
  x: list  # increasing
  mean: list
  sd: list
  seeds: int  # the fewest finite seeds behind a point
  groups: list  # the Group of each point


def curves_by(rows: list[dict], metric: str, by: tuple[str, ...],
              x: str = "n_train") -> dict[tuple, Curve]:
  """{values of `by`: Curve} of `metric` over seeds, x increasing."""
  points: dict = {}
  for g in group(rows, (*by, x), metric):
    points.setdefault(g.key[:-1], []).append(g)
  return {k: Curve([g.key[-1] for g in gs], [g.mean for g in gs], [g.sd for g in gs],
                   min(g.n for g in gs), gs) for k, gs in points.items()}


def curves(rows: list[dict], metric: str, panel: str, line: str, x: str) -> dict:
  """{panel value: {line value: Curve}}: curves_by nested for a figure."""
  out: dict = {}
  for (p, l), curve in curves_by(rows, metric, (panel, line), x).items():
    out.setdefault(p, {})[l] = curve
  return out
