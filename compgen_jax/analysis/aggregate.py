"""Numbers behind the sweep report: per-setting mean and spread over seeds, monotonicity, rank
correlation, the first crossing of a target and a power-law fit. Plain numpy on run rows."""

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


def ranks(x) -> np.ndarray:
  """Ranks 0..n-1 with ties given their average rank."""
  x = np.asarray(x, np.float64)
  order = np.argsort(x, kind="stable")
  r = np.empty(x.size)
  r[order] = np.arange(x.size)
  for value in np.unique(x):
    tied = x == value
    r[tied] = r[tied].mean()
  return r


def spearman(x, y) -> float:
  """Spearman rank correlation over the finite pairs; NaN with < 3 pairs or a constant side."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  ok = np.isfinite(x) & np.isfinite(y)
  x, y = x[ok], y[ok]
  if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
    return math.nan
  return float(np.corrcoef(ranks(x), ranks(y))[0, 1])


def non_decreasing(values) -> bool:
  """Every value >= the one before it (NaNs skipped)."""
  x = np.asarray(values, np.float64)
  x = x[np.isfinite(x)]
  return bool(np.all(np.diff(x) >= 0))


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


class Metric(NamedTuple):
  key: str  # row key, e.g. "ood/r2"
  label: str  # axis and column label
  slug: str  # in file names


def curves_by(rows: list[dict], metric: str, by: tuple[str, ...],
              x: str = "n_train") -> dict[tuple, tuple[list, list, list]]:
  """{values of `by`: (xs, means, sds)} of `metric` over seeds, xs increasing."""
  out: dict = {}
  for g in group(rows, (*by, x), metric):
    xs, means, sds = out.setdefault(g.key[:-1], ([], [], []))
    xs.append(g.key[-1])
    means.append(g.mean)
    sds.append(g.sd)
  return out


def curves(rows: list[dict], metric: str, panel: str, line: str, x: str) -> dict:
  """{panel value: {line value: (xs, means, sds)}}: curves_by nested for a figure."""
  out: dict = {}
  for (p, l), curve in curves_by(rows, metric, (panel, line), x).items():
    out.setdefault(p, {})[l] = curve
  return out
