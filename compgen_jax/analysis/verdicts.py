"""The sweep report's rules for saying yes, one mechanism for every section: comparisons of seed
means by 95% Welch t-intervals, rises within the seeds' noise (pooled along the curve), fitted
exponents with their t-interval and Holm over a claim's comparisons (correlations:
correlations.py; the readings beside each verdict: readings.py; the claims.json records: claims.py).

A judgement is True (yes), False (no) or None (not judged: too few seeds, runs or points)."""

import math
from typing import NamedTuple

import numpy as np
from scipy import stats

LEVEL = 0.95
MIN_SEEDS = 2  # a setting judged against another needs at least this many finite seeds
# Pairing by seed needs this many: with 2 the per-seed spread is one number, and on metrics that
# move in steps (accuracy over 512 trajectories) two seeds' differences can tie exactly.
MIN_PAIRED_SEEDS = 3
FITS_ID = 0.9  # a student fits its training tasks when its ID metric is at least this
CORRELATION_BAR = 0.5  # a strong correlation: the interval's lower end at least this
SHOWN, PARTIAL, NOT_SHOWN, NOT_JUDGED = "shown", "partial", "not shown", "not judged"
NOT_TESTABLE = "not testable here"  # the runs cannot tell the claim either way (reason beside)
VERDICTS = (SHOWN, PARTIAL, NOT_SHOWN, NOT_JUDGED, NOT_TESTABLE)

RULES = {
    "seeds": f"a comparison of two settings needs >= {MIN_SEEDS} seeds in each, else it is not "
             f"judged (one seed)",
    "lower": "A is clearly lower than B when the 95% Welch t-interval of mean(B) - mean(A) over "
             "seeds lies above 0",
    "paired": f"paired by seed where both settings ran the same >= {MIN_PAIRED_SEEDS} seeds of "
              f"the same task: seed s of each shares its teacher and split keys (a run is a "
              f"function of its seed's key), so the interval is the paired t-interval of the "
              f"per-seed differences (n - 1 degrees of freedom) instead of Welch's",
    "rises": "rises: no consecutive step drops beyond its noise (the 95% t-interval of each "
             "step's difference of seed means, from the seeds' variance pooled over the curve's "
             "points as in a one-way ANOVA, reaches 0 or above) and the last point is clearly "
             "above the first (that interval lies above 0); over 2 points this is one comparison",
    "level": "a mean is at least a bar when the lower end of its 95% t-interval over seeds is; "
             "below it when the upper end is",
    "exponent": "exponent below 1 when the upper end of its 95% interval (the regression's "
                "standard error x the t quantile at n - 2 degrees of freedom) is below 1; not "
                "shown when the lower end is above 1; not judged when the interval holds 1",
    "correlation": f"a strong correlation when the lower end of the 95% interval of the r "
                   f"judged (Fisher-z, or a cluster bootstrap where stated) is >= "
                   f"{CORRELATION_BAR} (else no)",
    "per_seed": "rises monotonically also asks every seed's own curve (seed s at each point) "
                "never to fall from one point to the next",
    "holm": f"a claim over several comparisons is shown when every one is yes; partial when "
            f"at least one yes survives Holm's step-down correction over its comparisons "
            f"(family-wise {1 - LEVEL:.2f}, two-sided p-values of the same tests); else not "
            f"shown",
    "fits": f"students fit their training tasks when their ID metric is >= {FITS_ID} (beside "
            f"it, the training-batch metric's change over the last quarter of the steps, mean "
            f"± s.d. over runs: still rising means more steps would fit better)",
    # Registered after every committed run (post hoc; REGISTRATION.md, issue 57):
    "trend": f"a rise along a scale axis (tasks, width, depth) is yes only when OOD rises by the "
             f"rising rule and, unless every run at its points fits (ID >= {FITS_ID}), OOD / ID "
             f"rises by the same rule too (else the rise is fit: not shown: fit)",
    "reaches": "a value reaches the paper's when its interval's lower end does (an interval that "
               "holds it is not told apart from it); a bounded metric's interval is held inside "
               "its bounds",
    "robust": "where the runs come from a few design points (held-out fractions), a yes must "
              "hold with each design point left out as well (leave-one-fraction-out)",
}


class Interval(NamedTuple):
  estimate: float
  low: float
  high: float
  p: float = math.nan  # two-sided p-value of estimate = 0 (Holm in `overall` reads it)

  def text(self, digits: int = 3) -> str:
    return (f"{self.estimate:+.{digits}f} [{self.low:+.{digits}f}, {self.high:+.{digits}f}]")


def finite(values) -> np.ndarray:
  x = np.asarray([_number(v) for v in values], np.float64)
  return x[np.isfinite(x)]


def _number(v) -> float:
  try:
    return float(v)
  except (TypeError, ValueError):
    return math.nan


def mean_interval(values) -> Interval | None:
  """The 95% t-interval of the mean over seeds (None with fewer than MIN_SEEDS)."""
  x = finite(values)
  if x.size < MIN_SEEDS:
    return None
  se = x.std(ddof=1) / math.sqrt(x.size)
  half = stats.t.ppf(0.5 + LEVEL / 2, x.size - 1) * se
  return Interval(float(x.mean()), float(x.mean() - half), float(x.mean() + half),
                  _p(float(x.mean()), se, x.size - 1))


def clipped(m: Interval | None, bounds: tuple[float, float]) -> Interval | None:
  """An interval of a bounded quantity's mean (an accuracy, an R^2 at most 1) with its ends held
  inside `bounds`: a t-interval over 2 or 3 seeds can reach past them, where no mean can be."""
  if m is None:
    return None
  low, high = bounds
  return m._replace(low=min(max(m.low, low), high), high=max(min(m.high, high), low))


def _p(estimate: float, se: float, dof: float) -> float:
  """Two-sided t-test p-value of estimate = 0 (without spread: 0, or none at exactly 0)."""
  if se == 0 or not math.isfinite(se):
    return 0.0 if estimate != 0 else math.nan
  return float(2 * stats.t.sf(abs(estimate) / se, dof))


def paired_difference(a: dict, b: dict) -> Interval | None:
  """The 95% t-interval of the mean per-seed difference a[s] - b[s] over the seeds both give a
  finite value (None with fewer than MIN_PAIRED_SEEDS of them)."""
  seeds = sorted(s for s in set(a) & set(b)
                 if math.isfinite(_number(a[s])) and math.isfinite(_number(b[s])))
  if len(seeds) < MIN_PAIRED_SEEDS:
    return None
  d = np.asarray([_number(a[s]) - _number(b[s]) for s in seeds], np.float64)
  se = d.std(ddof=1) / math.sqrt(d.size)
  half = float(stats.t.ppf(0.5 + LEVEL / 2, d.size - 1) * se)
  return Interval(float(d.mean()), float(d.mean() - half), float(d.mean() + half),
                  _p(float(d.mean()), se, d.size - 1))


def difference(a, b) -> Interval | None:
  """The 95% Welch t-interval of mean(a) - mean(b) (None with fewer than MIN_SEEDS in either);
  given {seed: value} dicts over the same >= MIN_PAIRED_SEEDS seeds, the paired interval
  (RULES['paired'])."""
  if isinstance(a, dict) and isinstance(b, dict):
    paired = paired_difference(a, b) if set(a) == set(b) else None
    if paired is not None:
      return paired
    a, b = list(a.values()), list(b.values())
  a, b = finite(a), finite(b)
  if a.size < MIN_SEEDS or b.size < MIN_SEEDS:
    return None
  va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
  d = float(a.mean() - b.mean())
  if va + vb == 0:  # no spread at all: the difference is exact
    return Interval(d, d, d, _p(d, 0.0, 1))
  dof = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
  half = float(stats.t.ppf(0.5 + LEVEL / 2, dof) * math.sqrt(va + vb))
  return Interval(d, d - half, d + half, _p(d, math.sqrt(va + vb), dof))


class Judgement(NamedTuple):
  ok: bool | None  # None: not judged
  detail: str
  p: float = math.nan  # the comparison's two-sided p-value, where it has one (for Holm)


ONE_SEED = Judgement(None, "one seed")


def lower(a, b) -> Judgement:
  """mean(a) clearly lower than mean(b) (seed values of each: lists, or {seed: value} dicts to
  pair them by seed)."""
  d = difference(b, a)
  if d is None:
    return ONE_SEED
  return Judgement(bool(d.low > 0), f"difference {d.text()}", d.p)


def within(a, b, tolerance: float) -> Judgement:
  """mean(a) is not below mean(b) by more than `tolerance`: yes when the interval of
  mean(b) - mean(a) ends below it, no when it starts above it, else not judged (too noisy)."""
  d = difference(b, a)
  if d is None:
    return ONE_SEED
  ok = True if d.high < tolerance else (False if d.low > tolerance else None)
  return Judgement(ok, f"shortfall {d.text()}, tolerance {tolerance}")


def at_least(values, bar: float) -> Judgement:
  """The seed mean is at least `bar` (True), below it (False) or not told apart (None)."""
  m = mean_interval(values)
  if m is None:
    return ONE_SEED
  ok = True if m.low >= bar else (False if m.high < bar else None)
  return Judgement(ok, f"mean {m.estimate:.3f} [{m.low:.3f}, {m.high:.3f}] vs {bar}",
                   mean_interval([v - bar for v in finite(values)]).p)


def pooled_differences(groups: list, pairs: list) -> list[Interval]:
  """95% t-intervals of mean(groups[j]) - mean(groups[i]) for each (i, j), from the within-group
  variance pooled over all groups (N - k degrees of freedom): the seeds' noise is taken to be
  the same along one curve, so 2 seeds a point still give a usable interval (Welch on two lone
  pairs has about 1 degree of freedom)."""
  xs = [finite(g) for g in groups]
  dof = sum(x.size for x in xs) - len(xs)
  ss = sum(float(((x - x.mean()) ** 2).sum()) for x in xs)
  sd = math.sqrt(ss / dof) if dof > 0 else math.nan
  out = []
  for i, j in pairs:
    d = float(xs[j].mean() - xs[i].mean())
    se = sd * math.sqrt(1 / xs[i].size + 1 / xs[j].size)
    half = float(stats.t.ppf(0.5 + LEVEL / 2, dof) * se) if dof > 0 else math.nan
    out.append(Interval(d, d - half, d + half, _p(d, se, dof) if dof > 0 else math.nan))
  return out


def rises(groups: list) -> Judgement:
  """Seed values per point of an increasing axis rise within the noise (RULES['rises']);
  given {seed: value} dicts, every seed's own curve must also never fall (RULES['per_seed'])."""
  if len(groups) < 2:
    return Judgement(None, "one point")
  dips = seed_dips(groups) if all(isinstance(g, dict) for g in groups) else {}
  groups = [list(g.values()) if isinstance(g, dict) else g for g in groups]
  if any(finite(g).size < MIN_SEEDS for g in groups):
    return ONE_SEED
  n = len(groups)
  *steps, overall = pooled_differences(groups, [(i, i + 1) for i in range(n - 1)] + [(0, n - 1)])
  drops = [i for i, s in enumerate(steps) if s.high < 0]
  head = "2 points: one comparison" if n == 2 else f"{n} points"
  detail = f"{head}; last - first {overall.text()}"
  if drops:
    detail += f"; drops beyond noise at step {', '.join(str(i + 1) for i in drops)}"
  if dips:
    detail += "; seed curves that fall: " + ", ".join(
        f"seed {s} at step {', '.join(str(i + 1) for i in at)}" for s, at in dips.items())
  return Judgement(bool(not drops and not dips and overall.low > 0), detail, overall.p)


def seed_dips(groups: list[dict]) -> dict:
  """{seed: [steps where that seed's own value falls]} over the seeds finite at every point."""
  seeds = sorted(set.intersection(*(set(g) for g in groups)), key=str)
  out = {}
  for s in seeds:
    v = [_number(g[s]) for g in groups]
    if all(math.isfinite(x) for x in v):
      at = [i for i in range(len(v) - 1) if v[i + 1] < v[i]]
      if at:
        out[s] = at
  return out


def exponent_interval(exponent: float, se: float, dof: int) -> Interval | None:
  """The 95% interval of a fitted slope from its standard error, t quantile at `dof` (n - 2 for
  a line through n points)."""
  if dof < 1 or not math.isfinite(exponent) or not math.isfinite(se):
    return None
  half = float(stats.t.ppf(0.5 + LEVEL / 2, dof) * se)
  return Interval(exponent, exponent - half, exponent + half)


def below(interval: Interval | None, bound: float) -> Judgement:
  """The interval lies below `bound` (True), above it (False) or holds it (None)."""
  if interval is None:
    return Judgement(None, "fewer than 3 points")
  ok = True if interval.high < bound else (False if interval.low > bound else None)
  return Judgement(ok, f"{interval.estimate:.3f} [{interval.low:.3f}, {interval.high:.3f}]")


def word(ok: bool | None) -> str:
  """A claim's verdict from one judgement: shown, not shown or not judged."""
  return {True: SHOWN, False: NOT_SHOWN, None: NOT_JUDGED}[ok]


def holm(judgements: list) -> list:
  """The oks after Holm's step-down correction over the claim's comparisons at 1 - LEVEL: a yes
  whose p-value fails its Holm threshold becomes a no (a yes without a p-value is kept)."""
  m = len(judgements)
  ps = sorted((j.p, i) for i, j in enumerate(judgements)
              if isinstance(j, Judgement) and j.ok and math.isfinite(j.p))
  oks = [j.ok if isinstance(j, Judgement) else j for j in judgements]
  for rank, (p, _) in enumerate(ps):
    if p > (1 - LEVEL) / (m - rank):  # step-down: this and every larger p fail
      for _, k in ps[rank:]:
        oks[k] = False
      break
  return oks


def overall(judgements: list) -> str:
  """A claim's verdict from its judgements (Judgements, or True / False / None each): shown
  when every one is yes (each at its own level: all must hold), partial when some yes survives
  Holm's correction over the claim's comparisons (RULES['holm']), else not shown."""
  oks = [j.ok if isinstance(j, Judgement) else j for j in judgements]
  judged = [ok for ok in oks if ok is not None]
  if not judged:
    return NOT_JUDGED
  if all(judged) and len(judged) == len(oks):
    return SHOWN
  return PARTIAL if any(ok is True for ok in holm(judgements)) else NOT_SHOWN


def n_seeds(n: int) -> str:
  return "1 seed" if n == 1 else f"{n} seeds"


def count(judgements: list) -> str:
  """'3 of 4 yes, 1 not judged'."""
  oks = [j.ok if isinstance(j, Judgement) else j for j in judgements]
  yes, none = sum(ok is True for ok in oks), sum(ok is None for ok in oks)
  return f"{yes} of {len(oks)} yes" + (f", {none} not judged" if none else "")

