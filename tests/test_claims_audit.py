"""Issue 57's audit, recomputed independently of compgen_jax/analysis: the committed rows are
read here with json alone and the audit's rules computed with numpy (scipy only for t and normal
quantiles), then set against the committed claims table (results/cpu/claims.json): model_size
"OOD rises with width" (OOD / ID where the students do not fit), decodability_fit "reaches
R^2 > 0.95" (the interval's lower end, one held-out fraction left out), data_scaling's layers
(a difference in differences within (M, K)) and task_support "popular does not hurt" (a margin
of a fifth of the smallest shown hurt). Also: no claims row's reading contradicts its verdict."""

import json
import math
import os
import re

import numpy as np
import pytest
from scipy import stats

from tests.helpers import REPO

RESULTS = os.path.join(REPO, "results", "cpu")
FITS, GENERALIZES, BAR = 0.9, 0.9, 0.975  # ID that fits; OOD that generalizes; r for R^2 0.95


def _jsonl(path: str) -> list[dict]:
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def _runs(experiment: str) -> list[dict]:
  """One dict per run of every finished program: its config (nested), its metrics at the last
  evaluated step (eval.jsonl over metrics.jsonl) and its probes at the last probed step."""
  sweep = os.path.join(RESULTS, experiment)
  if not os.path.exists(os.path.join(sweep, "index.json")):
    pytest.skip(f"no committed {experiment}")
  with open(os.path.join(sweep, "index.json")) as f:
    index = json.load(f)
  out = []
  for program in index["programs"]:
    wd = os.path.join(sweep, program["workdir"])
    with open(os.path.join(wd, "config.json")) as f:
      cfg = json.load(f)
    evals = [r for r in _jsonl(os.path.join(wd, "metrics.jsonl")) + _jsonl(
        os.path.join(wd, "eval.jsonl")) if "ood/r2" in r or "ood/acc" in r]
    probes = _jsonl(os.path.join(wd, "probes.jsonl"))
    probes = [r for r in probes if r["lambda"] == probes[0]["lambda"]] if probes else []
    last, last_probe = max(r["step"] for r in evals), max((r["step"] for r in probes), default=0)
    for run in sorted({r["run"] for r in evals if r["step"] == last}):
      row = {"cfg": cfg, "program": program["name"]}
      for r in evals:
        if r["step"] == last and r["run"] == run:
          row.update(r)
      for r in probes:
        if r["step"] == last_probe and r["run"] == run:
          row.update({k: v for k, v in r.items() if k.startswith("z/")})
      out.append(row)
  return out


def _claim(experiment: str, start: str) -> dict:
  with open(os.path.join(RESULTS, "claims.json")) as f:
    found = [c for c in json.load(f) if c["experiment"] == experiment
             and c["claim"].startswith(start)]
  assert len(found) == 1, (experiment, start, len(found))
  return found[0]


def _t(dof: float) -> float:
  return float(stats.t.ppf(0.975, dof))


def _rises(points: list[dict]) -> bool:
  """The rising rule: {seed: value} per point; no step drops beyond the pooled noise, last above
  first, every seed's own curve never falls."""
  xs = [np.asarray([v for v in p.values() if math.isfinite(v)]) for p in points]
  if any(x.size < 2 for x in xs):
    return False
  dof = sum(x.size for x in xs) - len(xs)
  sd = math.sqrt(sum(((x - x.mean()) ** 2).sum() for x in xs) / dof)

  def interval(i, j):
    d = xs[j].mean() - xs[i].mean()
    half = _t(dof) * sd * math.sqrt(1 / xs[i].size + 1 / xs[j].size)
    return d - half, d + half
  drops = any(interval(i, i + 1)[1] < 0 for i in range(len(xs) - 1))
  seeds = set.intersection(*(set(p) for p in points))
  dips = any(points[i + 1][s] < points[i][s] for s in seeds for i in range(len(points) - 1))
  return not drops and not dips and interval(0, len(xs) - 1)[0] > 0


def test_model_size_rises_with_width_is_fit_not_composition():
  runs = _runs("model_size")
  curves: dict = {}
  for r in runs:
    key = (r["cfg"]["encoding"]["name"], r["cfg"]["student"]["mlp"]["depth"])
    curves.setdefault(key, {}).setdefault(r["cfg"]["student"]["mlp"]["width"], []).append(r)
  ood_yes = combined_yes = 0
  tested = [c for c in curves.values() if len(c) > 1]
  for widths in tested:
    points = [widths[w] for w in sorted(widths)]
    ood = _rises([{r["seed"]: r["ood/r2"] for r in p} for p in points])
    ratio = _rises([{r["seed"]: r["ood/r2"] / r["id/r2"] if r["id/r2"] > 0 else math.nan
                     for r in p} for p in points])
    every_fits = all(r["id/r2"] >= FITS for p in points for r in p)
    ood_yes += ood
    combined_yes += ood and (every_fits or ratio)
  assert (len(tested), ood_yes, combined_yes) == (6, 6, 0)  # the audit: OOD / ID in 0 of 6
  claim = _claim("model_size", "OOD R^2 rises with the student's width")
  assert claim["verdict"] == "not shown"
  assert claim["ours"].startswith(f"not shown: fit at 6 of 6 (OOD rises, OOD / ID does not); "
                                  f"{combined_yes} of 6 yes; OOD alone {ood_yes} of 6 yes")
  assert claim["registration"] == "post hoc"


def _pearson(x, y) -> float:
  return float(np.corrcoef(x, y)[0, 1])


def _partial(x, y, z) -> float:
  rx, ry = (v - np.polyval(np.polyfit(z, v, 1), z) for v in (x, y))
  return _pearson(rx, ry)


def _bootstrap_low(x, y, z=None, draws: int = 1000) -> float:
  """The 2.5% percentile of r (partial r given z) over resamples of the runs (one cluster
  each: every decodability_fit run has its own program and seed); numpy's own generator."""
  picks = np.random.default_rng(57).integers(0, x.size, size=(draws, x.size))
  rs = [_pearson(x[p], y[p]) if z is None else _partial(x[p], y[p], z[p]) for p in picks]
  return float(np.nanquantile(rs, 0.025))


def test_decodability_fit_does_not_reach_the_papers_r2_and_rests_on_one_fraction():
  runs = _runs("decodability_fit")
  assert len(runs) == 24 and all(r["id/r2"] >= FITS for r in runs)  # fit held
  frac = np.asarray([r["frac_ood"] for r in runs])
  ood, ids = (np.asarray([r[k] for r in runs]) for k in ("ood/r2", "id/r2"))
  last = max(k for k in runs[0] if re.fullmatch(r"z/dense_\d+/ood_r2", k))
  for layer, key in (("best layer", "z/best/ood_r2"), ("last hidden", last)):
    x = np.asarray([r[key] for r in runs])
    claim = _claim("decodability_fit", "task decodability correlates strongly with OOD R^2 at "
                   f"fixed fit ({layer}")
    assert f"r = {_pearson(x, ood):.3f} [" in claim["ours"]
    # reaching R^2 > 0.95 asks the lower end: over every run it is far below r = 0.975
    assert _bootstrap_low(x, ood) < BAR - 0.05
    assert "short of it" in claim["against_paper"] and "reaches it" not in claim["against_paper"]
    # the verdict, with the far fraction (0.95: 35 training tasks) left out
    keep = frac != 0.95
    partial = _partial(x[keep], ood[keep], ids[keep])
    assert f"without 0.95, r = {partial:.3f} [" in claim["ours"].split("given ID")[1]
    assert _bootstrap_low(x[keep], ood[keep], ids[keep]) < 0.5 - 0.05
    assert claim["verdict"] == "not shown" and "registered before the runs): shown" in \
        claim["note"]
  best = np.asarray([r["z/best/ood_r2"] for r in runs])
  assert round(_pearson(best[frac != 0.95], ood[frac != 0.95]), 3) == 0.833  # the audit's


def _welch(a, b) -> tuple[float, float, float]:
  """mean(a) - mean(b) with its 95% Welch t-interval."""
  va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
  dof = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
  d, half = a.mean() - b.mean(), _t(dof) * math.sqrt(va + vb)
  return d, d - half, d + half


def test_data_scaling_layers_within_m_and_k_as_a_difference_in_differences():
  runs = [r for r in _runs("data_scaling") if r["cfg"]["encoding"]["name"] == "identity"]
  arch = {}
  for r in runs:
    arch.setdefault((r["cfg"]["student"]["mlp"]["width"], r["cfg"]["student"]["mlp"]["depth"]),
                    []).append(r)
  fitted = [rs for rs in arch.values() if all(r["id/r2"] >= FITS for r in rs)]
  assert len(fitted) == 1  # 4x128
  cells: dict = {}
  for r in fitted[0]:
    layers = sorted((k for k in r if re.fullmatch(r"z/dense_\d+/ood_r2", k)),
                    key=lambda k: int(k.split("_")[1].split("/")[0]))
    change = r[layers[-1]] - r[layers[0]]
    group = "succeeding" if r["ood/r2"] >= GENERALIZES else "failing"
    key = (r["cfg"]["task"]["num_modules"], r["cfg"]["task"]["max_hotness"])
    cells.setdefault(key, {"succeeding": [], "failing": []})[group].append(change)
  claim = _claim("data_scaling", "identity-encoded runs that fail lose the constituents")
  testable = {k: c for k, c in cells.items() if min(len(c["failing"]), len(c["succeeding"])) >= 2}
  assert set(testable) == {(8, 3), (16, 3)}  # no K = 2 cell has 2 succeeding runs
  yes = 0
  for (M, K), c in testable.items():
    d, low, high = _welch(np.asarray(c["succeeding"]), np.asarray(c["failing"]))
    assert f"M={M}, K={K} (" in claim["ours"]
    assert f"succeeding - failing {d:+.3f} [{low:+.3f}, {high:+.3f}]" in claim["ours"]
    yes += low > 0
  assert yes == 0 and claim["verdict"] == "not shown"  # was shown on the pooled last layer
  assert "0 of 2 yes" in claim["ours"]


def test_task_support_popular_modules_within_a_fifth_of_the_smallest_hurt():
  runs = _runs("task_support")
  by: dict = {}
  for r in runs:
    by.setdefault((r["cfg"]["task"]["support"], r["frac_ood"]), {})[r["seed"]] = r["ood/r2"]
  hurts = []
  for strategy in ("pseudo_random_disconnected", "unpopular_modules"):
    for frac in (0.25, 0.5):
      a, base = by[(strategy, frac)], by[("random", frac)]
      d = np.asarray([base[s] - a[s] for s in sorted(a)])
      half = _t(d.size - 1) * d.std(ddof=1) / math.sqrt(d.size)
      assert d.mean() - half > 0  # the hurt is shown: the paired interval above 0
      hurts.append(np.mean(list(base.values())) - np.mean(list(a.values())))
  # non_compositional (a fixed split) hurts by more against either random setting: not the least
  non = [v for (s, _), vals in by.items() if s == "non_compositional" for v in vals.values()]
  assert all(np.mean(list(by[("random", f)].values())) - np.mean(non) > min(hurts)
             for f in (0.25, 0.5))
  margin = 0.2 * min(hurts)
  claim = _claim("task_support", "OOD R^2: popular_modules support does not hurt")
  assert f"equivalence margin {margin:.3f} = 0.2 x the smallest shown hurt ({min(hurts):.3f}" \
      in claim["note"]
  base_sd = math.sqrt(np.mean([np.var(list(by[("random", f)].values()), ddof=1)
                               for f in (0.25, 0.5)]))
  assert _t(2) * base_sd * math.sqrt(2 / 3) < margin  # an outcome could pass it
  for frac in (0.25, 0.5):
    a, base = by[("popular_modules", frac)], by[("random", frac)]
    d = np.asarray([base[s] - a[s] for s in sorted(a)])
    assert d.mean() + _t(d.size - 1) * d.std(ddof=1) / math.sqrt(d.size) < margin
  assert claim["verdict"] == "shown"  # was "not shown", contradicted, on a 0.003 margin


AGREE = ("reaches it", "ours agrees")
DISAGREE = ("ours does not agree", "ours contradicts it")
# a mean of a bounded metric with its interval, as a reading prints it
MEAN = re.compile(r"(?:ours|ID|\d:) (-?\d\.\d{3}) \[(-?\d\.\d{3}), (-?\d\.\d{3})\]")


def test_no_reading_contradicts_its_verdict():
  with open(os.path.join(RESULTS, "claims.json")) as f:
    rows = json.load(f)
  for c in rows:
    where = f"{c['experiment']}: {c['claim']}"
    if any(p in c["against_paper"] for p in AGREE):
      assert c["verdict"] in ("shown", "partial"), where
    if any(p in c["against_paper"] for p in DISAGREE):
      assert c["verdict"] == "not shown", where
    # the means read against the paper's value (R^2, accuracy, exact match) stay in bounds
    texts = [c["against_paper"]] + ([c["ours"]] if c["experiment"] == "letters" else [])
    for m in (m for t in texts for m in MEAN.finditer(t)):
      assert float(m.group(3)) <= 1.0, (where, m.group(0))
      if "accuracy" in c["claim"] or c["experiment"] == "letters":
        assert float(m.group(2)) >= 0.0, (where, m.group(0))
    assert c["registration"] in ("registered before its runs", "post hoc"), where
    assert re.fullmatch(r"[0-9a-f]{7,}", c["rule_commit"]), where
