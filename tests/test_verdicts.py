"""The report's rules for saying yes (analysis/verdicts.py) against independent computations:
intervals and correlations against scipy, one seed judges nothing, rises within the noise (pooled
along the curve), lower / within / at least a bar. The report sections that apply them, on
hand-made rows: tests/test_report_sections.py."""

import math

import numpy as np
import pytest
from scipy import stats

from compgen_jax.analysis import (
  aggregate,
  correlations,
  verdicts,
)

# ------------------------------------------------------------------------------------------
# Intervals against scipy


def test_intervals_match_scipy():
  rng = np.random.default_rng(0)
  a, b = rng.normal(0.5, 0.1, 5), rng.normal(0.3, 0.05, 3)
  d = verdicts.difference(a, b)
  ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
  assert (d.low, d.high) == pytest.approx((ci.low, ci.high))
  assert d.estimate == pytest.approx(a.mean() - b.mean())
  m = verdicts.mean_interval(a)
  assert (m.low, m.high) == pytest.approx(stats.t.interval(0.95, 4, a.mean(), stats.sem(a)))
  assert verdicts.difference([0.5], b) is None and verdicts.mean_interval([0.5, "nan"]) is None
  assert verdicts.difference([1.0, 1.0], [0.5, 0.5])[:3] == (0.5, 0.5, 0.5)  # exact: no spread


def test_paired_interval_matches_scipy_and_pairs_only_matching_seeds():
  rng = np.random.default_rng(1)
  base = rng.normal(0.6, 0.15, 4)  # each seed its own teacher: large spread between seeds
  a, b = base + 0.1 + rng.normal(0, 0.01, 4), base
  d = verdicts.difference(dict(enumerate(a)), dict(enumerate(b)))
  ci = stats.ttest_rel(a, b).confidence_interval(0.95)
  assert (d.low, d.high) == pytest.approx((ci.low, ci.high))
  assert d.estimate == pytest.approx((a - b).mean())
  # The consistent per-seed gap is clear paired; Welch's interval, blind to the pairing, is not.
  assert verdicts.lower(dict(enumerate(b)), dict(enumerate(a))).ok is True
  assert verdicts.lower(list(b), list(a)).ok is False
  # Seeds that do not match, or fewer than 3 of them, fall back to Welch's interval.
  welch = verdicts.difference(list(a), list(b[:3]))
  assert verdicts.difference(dict(enumerate(a)), {0: b[0], 1: b[1], 2: b[2]}) == welch
  two = verdicts.difference({0: 0.7, 1: 0.8}, {0: 0.6, 1: 0.7})  # ties exactly: not paired
  assert two == verdicts.difference([0.7, 0.8], [0.6, 0.7]) and two.low < two.high
  rows = [{"seed": 1, "m": 0.5}, {"seed": 0, "m": 0.7}]
  assert aggregate.by_seed(rows, "m") == {1: 0.5, 0: 0.7}
  assert aggregate.by_seed(rows + [{"seed": 1, "m": 0.6}], "m") == [0.5, 0.7, 0.6]


def test_correlations_match_scipy_and_the_partial_formula():
  rng = np.random.default_rng(1)
  n_train = rng.uniform(1, 5, 40)
  x = n_train + rng.normal(0, 0.5, 40)
  y = n_train + 0.5 * x + rng.normal(0, 0.5, 40)
  c = correlations.correlation(x, y)
  ref = stats.pearsonr(x, y)
  assert c.r == pytest.approx(ref.statistic)
  ci = ref.confidence_interval(0.95)  # Fisher z, as ours
  assert (c.low, c.high) == pytest.approx((ci.low, ci.high))
  p = correlations.correlation(x, y, n_train)
  rxy, rxz, ryz = (stats.pearsonr(u, v).statistic for u, v in ((x, y), (x, n_train),
                                                                (y, n_train)))
  assert p.r == pytest.approx((rxy - rxz * ryz) / math.sqrt((1 - rxz**2) * (1 - ryz**2)))
  z, half = math.atanh(p.r), stats.norm.ppf(0.975) / math.sqrt(40 - 3 - 1)
  assert (p.low, p.high) == pytest.approx((math.tanh(z - half), math.tanh(z + half)))
  assert math.isnan(correlations.correlation([1.0, 2.0, 3.0], [1.0, 2.0, 4.0]).r)  # n < 4


def test_exponent_interval_matches_linregress():
  rng = np.random.default_rng(2)
  T = np.geomspace(50, 5000, 6)
  needed = 0.5 * T**0.6 * np.exp(rng.normal(0, 0.05, 6))
  fit = aggregate.fit_power_law(T, needed)
  ref = stats.linregress(np.log(T), np.log(needed))
  assert fit.exponent_se == pytest.approx(ref.stderr)
  interval = verdicts.exponent_interval(fit.exponent, fit.exponent_se, fit.n - 2)
  assert interval.high - fit.exponent == pytest.approx(stats.t.ppf(0.975, 4) * ref.stderr)


# ------------------------------------------------------------------------------------------
# Each rule can say yes, no and not judged


def test_one_seed_judges_nothing():
  assert verdicts.lower([0.1], [0.9]).ok is None
  assert verdicts.rises([[0.1], [0.5], [0.9]])[:2] == (None, "one seed")
  assert verdicts.within([0.9], [0.9], 0.05).ok is None
  assert verdicts.at_least([0.99], 0.9).ok is None
  assert verdicts.overall([None, None]) == verdicts.NOT_JUDGED


def _seeds(rng, mean, sd=0.01, n=3):
  return list(mean + rng.normal(0, sd, n))


def test_rises_within_the_noise():
  rng = np.random.default_rng(3)
  monotone = [_seeds(rng, m) for m in (0.2, 0.4, 0.6, 0.8)]
  j = verdicts.rises(monotone)
  assert j.ok is True and j.detail.startswith("4 points")
  flat_step = [_seeds(rng, m) for m in (0.2, 0.6, 0.6, 0.8)]  # a flat step is within noise
  assert verdicts.rises(flat_step).ok is True
  dip = [_seeds(rng, m) for m in (0.2, 0.6, 0.4, 0.8)]  # first < last, but a real drop
  j = verdicts.rises(dip)
  assert j.ok is False and "drops beyond noise at step 2" in j.detail
  noisy = [_seeds(rng, m, sd=0.3) for m in (0.2, 0.3)]  # up on average, inside the noise
  j = verdicts.rises(noisy)
  assert j.ok is False and j.detail.startswith("2 points: one comparison")
  assert verdicts.rises([_seeds(rng, 0.5)]).ok is None  # one point


def test_rises_pools_the_seeds_noise_along_the_curve():
  # Against an independent one-way ANOVA: the residual mean square of an OLS fit of the values
  # on point indicators (statsmodels-free: numpy lstsq), its N - k dof, the t quantile.
  groups = [[0.40, 0.46], [0.55, 0.58], [0.70, 0.66], [0.81, 0.85]]
  y = np.concatenate([np.asarray(g, np.float64) for g in groups])
  design = np.repeat(np.eye(4), 2, axis=0)
  coef, res, *_ = np.linalg.lstsq(design, y, rcond=None)
  mse = float(res[0]) / (y.size - 4)
  half = stats.t.ppf(0.975, y.size - 4) * math.sqrt(mse * (1 / 2 + 1 / 2))
  got = verdicts.pooled_differences(groups, [(0, 3), (1, 2)])
  np.testing.assert_allclose([got[0].estimate, got[0].low, got[0].high],
                             [coef[3] - coef[0], coef[3] - coef[0] - half,
                              coef[3] - coef[0] + half], rtol=1e-12)
  np.testing.assert_allclose(got[1].high - got[1].low, 2 * half, rtol=1e-12)
  # With 2 seeds a point a clear rise is judged yes (Welch on the end points alone has ~1 dof
  # and a t quantile of 12.7: it could hardly ever say yes), and a drop beyond noise is a no.
  assert verdicts.rises(groups).ok is True
  assert verdicts.difference(groups[3], groups[0]).low < got[0].low
  dip = [[0.40, 0.42], [0.70, 0.71], [0.55, 0.56], [0.80, 0.82]]
  j = verdicts.rises(dip)
  assert j.ok is False and "drops beyond noise at step 2" in j.detail


def test_lower_within_and_at_least():
  assert verdicts.lower([0.3, 0.32], [0.9, 0.92]).ok is True
  assert verdicts.lower([0.88, 0.9], [0.9, 0.92]).ok is False
  assert verdicts.within([0.9, 0.91, 0.9, 0.91], [0.9, 0.92, 0.91, 0.91], 0.05).ok is True
  assert verdicts.within([0.3, 0.31, 0.3], [0.9, 0.92, 0.91], 0.05).ok is False
  assert verdicts.within([0.5, 0.9], [0.9, 0.92], 0.05).ok is None  # too noisy to tell
  assert verdicts.at_least([0.97, 0.98, 0.97], 0.95).ok is True
  assert verdicts.at_least([0.80, 0.82, 0.81], 0.95).ok is False
  assert verdicts.at_least([0.90, 1.0], 0.95).ok is None  # the interval holds the bar
  assert verdicts.overall([True, True]) == verdicts.SHOWN
  assert verdicts.overall([True, None]) == verdicts.PARTIAL
  assert verdicts.overall([True, False]) == verdicts.PARTIAL
  assert verdicts.overall([False, None]) == verdicts.NOT_SHOWN
