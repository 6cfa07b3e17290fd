"""The Theorem 3.1 report: it regenerates from the committed rows, and its verdicts follow the
stated rules (checked on planted rows against an independent float64 slope and t-interval)."""

import json
import os

import numpy as np
import pytest
from scipy import stats

from compgen_jax import metric_writer
from compgen_jax.analysis import claims as claims_lib
from compgen_jax.theory import report
from tests.helpers import REPO, load_config

COMMITTED = os.path.join(REPO, "results", "cpu", "theorem")


@pytest.mark.skipif(not os.path.exists(os.path.join(COMMITTED, report.REPORT_FILE)),
                    reason="no committed theorem results")
def test_committed_report_regenerates_from_the_committed_rows(tmp_path):
  path = report.write_report(COMMITTED, str(tmp_path))
  for name, made in ((report.REPORT_FILE, path), (report.CLAIMS_FILE, tmp_path / "claims.json")):
    with open(made) as f, open(os.path.join(COMMITTED, name)) as g:
      assert f.read() == g.read(), name
  for png in (report.ERROR_PNG, report.COUNT_PNG):
    assert os.path.getsize(tmp_path / png) > 0
  records = claims_lib.read_claims(os.path.join(COMMITTED, report.CLAIMS_FILE))
  assert [r["experiment"] for r in records] == ["theorem", "theorem"]


def _error_rows(exponent, teachers=3, noise=0.02, bound_factor=3.0, seed=0):
  """Planted sup errors c_t N^exponent (lognormal noise) under bounds bound_factor x the error at
  N=4 falling as N^-2."""
  gen = np.random.default_rng(seed)
  rows = []
  for t in range(teachers):
    c = gen.uniform(0.5, 2.0)
    for n in (4, 8, 16, 32, 64, 128):
      err = c * (n / 4) ** exponent * np.exp(noise * gen.normal())
      bound = bound_factor * c * (n / 4) ** -2.0
      rows.append(dict(kind="error", teacher=t, resolution=n, sup_error=float(err),
                       bound=float(bound), sharp_bound=float(bound / 2), neurons=8 * n + 24,
                       num_latents=10, num_inputs=10))
  return rows


def _np_mean_slope_interval(rows):
  """Per-teacher OLS slope cov(x, y) / var(x) of log error on log N; 95% t-interval of the mean."""
  slopes = []
  for t in sorted({r["teacher"] for r in rows}):
    x = np.log([r["resolution"] for r in rows if r["teacher"] == t])
    y = np.log([r["sup_error"] for r in rows if r["teacher"] == t])
    slopes.append(np.sum((x - x.mean()) * (y - y.mean())) / np.sum((x - x.mean()) ** 2))
  s = np.asarray(slopes, np.float64)
  half = stats.t.ppf(0.975, s.size - 1) * s.std(ddof=1) / np.sqrt(s.size)
  return s.mean(), s.mean() - half, s.mean() + half


def test_rate_verdict_and_interval_follow_the_rule():
  rows = _error_rows(-2.0)
  verdict, interval, within = report.rate_verdict(rows)
  np.testing.assert_allclose(interval[:3], _np_mean_slope_interval(rows), rtol=1e-9)
  assert (verdict, within) == ("shown", True)
  # Falls like N^-1: the interval holds -1 (and the planted errors overshoot the bound).
  assert report.rate_verdict(_error_rows(-1.0, bound_factor=1e3))[0] == "not shown"
  # N^-1.5, tightly: excludes -1 and -2, bound held -> partial.
  assert report.rate_verdict(_error_rows(-1.5, noise=0.001, bound_factor=1e3))[0] == "partial"
  # The right rate above the bound is not shown.
  assert report.rate_verdict(_error_rows(-2.0, bound_factor=0.5))[:3:2] == ("not shown", False)
  assert report.rate_verdict(_error_rows(-2.0, teachers=1))[0] == "not judged"


def _count_rows(hidden=lambda m: 100, error=1e-4, eps=1e-3):
  return [dict(kind="count", num_modules=m, eps=eps, resolution=10, own_resolution=9,
               neurons=m + 2 * 4 + hidden(m), hidden_neurons=hidden(m), num_tasks=m * m,
               memorising_neurons=4 * m * m, bound=5e-4, sup_error=error)
          for m in (4, 8, 16)]


def test_count_verdict_follows_the_rule():
  verdict, slope = report.count_verdict(_count_rows())
  assert (verdict, round(slope, 9)) == ("shown", 1.0)
  assert report.count_verdict(_count_rows(hidden=lambda m: 100 + m))[0] == "not shown"
  assert report.count_verdict(_count_rows(error=2e-3))[0] == "not shown"


def test_report_of_planted_rows(tmp_path):
  cfg = load_config("theorem", "tiny").to_dict()
  metric_writer.append_rows(str(tmp_path / report.TABLE_FILE), _error_rows(-1.0, bound_factor=1e3)
                            + _count_rows())
  with open(tmp_path / "config.json", "w") as f:
    json.dump(cfg, f)
  text = open(report.write_report(str(tmp_path))).read()
  records = claims_lib.read_claims(str(tmp_path / report.CLAIMS_FILE))
  assert [r["verdict"] for r in records] == ["not shown", "shown"]
  assert "Verdict: **not shown**." in text and "## SGD" not in text  # no sgd rows
