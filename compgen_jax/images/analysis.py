"""Decodability vs composition success, from the workdirs' eval.jsonl and probes.jsonl alone:
across runs (Pearson, Spearman, partial correlation controlling for log coverage), within each
coverage level, and per concept within a run; figures and report.md."""

import math
import os

import numpy as np

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import correlation, fields

# The decodabilities the report knows, in its order (the first is its main one); decodability()
# adds every other the rows carry.
DECODABILITY = ("probe/all/t1/ood_acc", "probe/fixed/t1/ood_acc", "probe/all/traj/ood_acc",
                "probe/fixed/traj/ood_acc")
SUCCESS = "ood/success"
# The evaluation metrics the report knows, in its order; levels() adds every other the rows
# carry but the training combinations' slot accuracies and rejections (id/success stands for
# them: the report is about the held-out combinations).
LEVELS = ("id/success", SUCCESS, "ood/shape_acc", "ood/colour_acc", "ood/rejected")
NOT_LEVELS = ("id/shape_acc", "id/colour_acc", "id/rejected")


def decodability(rows: list[dict]) -> list[str]:
  """DECODABILITY (NaN where not probed), then every other held-out probe accuracy at the best
  layer the rows carry, `probe/<fit>/<t>/ood_acc` (not the per-layer
  `probe/<fit>/step<s>/layer<l>/...` behind them)."""
  keys = fields.present(rows, lambda k: k.startswith("probe/") and k.endswith("/ood_acc")
                        and k.count("/") == 3)
  return fields.ordered([*DECODABILITY, *keys], DECODABILITY)


def levels(rows: list[dict]) -> list[str]:
  """LEVELS, then every other evaluation metric the rows carry (`id/<name>`, `ood/<name>`) but
  NOT_LEVELS."""
  keys = fields.present(rows, lambda k: k.split("/")[0] in ("id", "ood"))
  return fields.ordered([*LEVELS, *keys], LEVELS, NOT_LEVELS)


def spearman(x, y) -> float:
  """Spearman's rho: Pearson r of average ranks (finite pairs only)."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  ok = np.isfinite(x) & np.isfinite(y)
  return correlation.pearson(_ranks(x[ok]), _ranks(y[ok]))[0]


def _ranks(a: np.ndarray) -> np.ndarray:
  order = np.argsort(a, kind="stable")
  ranks = np.empty(len(a))
  ranks[order] = np.arange(len(a))
  for v in np.unique(a):  # ties share their mean rank
    ranks[a == v] = ranks[a == v].mean()
  return ranks


def partial(x, y, z) -> float:
  """Pearson r of x and y after removing from each its least-squares linear fit on z."""
  x, y, z = (np.asarray(a, np.float64) for a in (x, y, z))
  ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(z)
  if ok.sum() < 4:
    return math.nan
  design = np.stack([np.ones(ok.sum()), z[ok]], 1)
  resid = lambda v: v - design @ np.linalg.lstsq(design, v, rcond=None)[0]
  return correlation.pearson(resid(x[ok]), resid(y[ok]))[0]


def programs(workdir: str) -> list[str]:
  """Program workdirs under `workdir` (itself when it is one)."""
  if os.path.exists(os.path.join(workdir, workdir_lib.EVAL_FILE)):
    return [workdir]
  return sorted(os.path.join(workdir, d) for d in os.listdir(workdir)
                if os.path.exists(os.path.join(workdir, d, workdir_lib.EVAL_FILE)))


def collect(workdir: str) -> list[dict]:
  """One row per run of every program: its last eval row merged with its probe row (first
  lambda) of the same step, and the program's name."""
  out = []
  for prog in programs(workdir):
    evals = metric_writer.read_rows(os.path.join(prog, workdir_lib.EVAL_FILE))
    last = max(r["step"] for r in evals)
    probe_rows = [r for r in metric_writer.read_rows(os.path.join(prog, workdir_lib.PROBE_FILE))
                  if r["step"] == last]
    lam = probe_rows[0]["lambda"] if probe_rows else None
    by_run = {r["run"]: r for r in probe_rows if r["lambda"] == lam}
    for r in evals:
      if r["step"] == last:
        out.append({**by_run.get(r["run"], {}), **r, "program": os.path.basename(prog)})
  return out


def _col(rows, key):
  return np.array([float(r.get(key, math.nan)) for r in rows], np.float64)


def across_runs(rows: list[dict], x_key: str, y_key: str = SUCCESS) -> dict:
  """Pearson, Spearman and partial (controlling for log coverage) over all runs; Pearson within
  each coverage level (and their mean)."""
  x, y, cov = _col(rows, x_key), _col(rows, y_key), _col(rows, "coverage")
  within = {}
  for c in sorted(set(cov)):
    at = cov == c
    within[float(c)] = correlation.pearson(x[at], y[at])[0]
  finite = [v for v in within.values() if np.isfinite(v)]
  return {"n": int(np.sum(np.isfinite(x) & np.isfinite(y))),
          "pearson": correlation.pearson(x, y)[0], "spearman": spearman(x, y),
          "partial": partial(x, y, np.log(cov)), "within": within,
          "within_mean": float(np.mean(finite)) if finite else math.nan}


def per_concept(rows: list[dict]) -> list[float]:
  """Per run: Spearman over concepts of probe recall (best layer, t = 1) vs held-out success of
  the samples whose prompt has the concept."""
  out = []
  for r in rows:
    names = [k.split("/")[1] for k in r if k.startswith("ood_concept/")]
    x = [float(r.get(f"probe_concept/{n}/recall", math.nan)) for n in names]
    y = [float(r[f"ood_concept/{n}/success"]) for n in names]
    out.append(spearman(x, y))
  return out


def by_level(rows: list[dict], key: str) -> dict:
  """{(program, coverage): (mean, sd, n)} over seeds."""
  groups = {}
  for r in rows:
    groups.setdefault((r["program"], r["coverage"]), []).append(float(r.get(key, math.nan)))
  return {k: (float(np.nanmean(v)), float(np.nanstd(v)), len(v)) for k, v in
          sorted(groups.items())}


def rises(rows: list[dict], key: str = SUCCESS) -> dict:
  """Per program: is the seed-mean of `key` at the highest coverage above the lowest, and is it
  monotone in coverage?"""
  out = {}
  levels = by_level(rows, key)
  for prog in sorted({p for p, _ in levels}):
    means = [levels[(p, c)][0] for p, c in levels if p == prog]
    out[prog] = {"up": means[-1] > means[0],
                 "monotone": bool(np.all(np.diff(means) >= -1e-9)), "means": means}
  return out
