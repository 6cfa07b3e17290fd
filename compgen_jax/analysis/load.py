"""Workdir files -> tables: one row per run with its config values, evaluation metrics and probe
R^2 per layer.

Reads config.json, metrics.jsonl, eval.jsonl and probes.jsonl only (never checkpoints), and keeps
everything they carry: every key of the flattened config and every metric of the rows, so a new
family, student, encoding or evaluator reaches the report without a list here to extend; each
report section picks the keys it uses.
"""

import math
import os

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.types import ConfigError

DECODABILITY = "z/best/ood_r2"  # OOD probe R^2 of z at the student layer best by ID probe R^2
# A run's training-batch metric train/<m> at its last logged step minus at the last logged step
# <= LATE of it, as row key late_rise/<m>: still rising at the end means more steps would fit
# the training tasks better (underfitting by steps, not by capacity).
LATE = 0.75
TRAIN_PREFIX = "train/"  # a metric of the training batches, not an evaluation


def measurement(key: str) -> bool:
  """A row key that is a measurement (`ood/r2`, `z/dense_0/ood_r2`): metric keys name their
  split or target before a slash; the keys without one say which step, run and probe a row is
  (`step`, `run`, `seed`, `frac_ood`, `n_train`, `lambda`, ...)."""
  return "/" in key


def number(value) -> float:
  """float(value); NaN for None or non-numbers (jsonl stores nan as a string)."""
  try:
    return float(value)
  except (TypeError, ValueError):
    return math.nan


def _latest(rows: list[dict], step: int, run: int, key: str) -> dict | None:
  """The last row (latest written) of `run` at `step` that has `key`."""
  found = [r for r in rows if r.get("step") == step and r.get("run") == run and key in r]
  return found[-1] if found else None


def _merged(rows: list[dict], step: int, run: int) -> dict:
  """Every row of `run` at `step` in one dict, a later row's key winning (a standalone
  evaluation over an in-training one of the same checkpoint)."""
  out = {}
  for r in rows:
    if r.get("step") == step and r.get("run") == run:
      out.update(r)
  return out


def late_rises(metric_rows: list[dict], run: int) -> dict:
  """{late_rise/<m>: train/<m> at the last logged step - at the last logged step <= LATE of it}
  of one run's training rows (nothing for a key logged at fewer than two steps)."""
  out = {}
  keys = {k for r in metric_rows if r.get("run") == run for k in r if k.startswith(TRAIN_PREFIX)}
  for key in sorted(keys):
    by_step = {r["step"]: number(r[key]) for r in metric_rows if r.get("run") == run and key in r}
    last = max(by_step)
    early = [s for s in by_step if s <= LATE * last]
    if early:
      out["late_rise/" + key.removeprefix(TRAIN_PREFIX)] = by_step[last] - by_step[max(early)]
  return out


def evaluation(row: dict) -> bool:
  """A metrics.jsonl row that carries an evaluation: a measurement not of the training batches
  (whichever evaluator wrote it)."""
  return any(measurement(k) and not k.startswith(TRAIN_PREFIX) for k in row)


def eval_rows(workdir: str, metric_rows: list[dict]) -> list[dict]:
  """Evaluation rows: the in-training evaluations (of the workdir's metrics.jsonl rows, read
  once by the caller), then the standalone eval.jsonl (later rows win in _merged)."""
  evals = metric_writer.read_rows(os.path.join(workdir, workdir_lib.EVAL_FILE))
  return [r for r in metric_rows if evaluation(r)] + evals


def read_workdir(workdir: str, lam: float | None = None, target: str = "z") -> list[dict]:
  """One row per run at the last probed step (the last evaluated step if never probed).

  lam picks the probe's lambda (default: the first one in probes.jsonl).
  """
  cfg = workdir_lib.load_config(workdir)
  probe_rows = metric_writer.read_rows(os.path.join(workdir, workdir_lib.PROBE_FILE))
  if probe_rows:
    lam = float(probe_rows[0]["lambda"]) if lam is None else float(lam)
    probe_rows = [r for r in probe_rows if math.isclose(float(r["lambda"]), lam, rel_tol=1e-6)]
    if not probe_rows:
      raise ConfigError("lambda", f"no probes with lambda={lam} in {workdir!r}")
  trained = metric_writer.read_rows(os.path.join(workdir, workdir_lib.METRICS_FILE))
  evals = eval_rows(workdir, trained)
  source = probe_rows or evals
  if not source:
    return []
  step = max(r["step"] for r in source)
  config = workdir_lib.flatten(cfg)
  out = []
  for run in sorted({r["run"] for r in source if r["step"] == step}):
    probe = _latest(probe_rows, step, run, f"{target}/best/ood_r2") or {}
    ev = _merged(evals, step, run)
    # Which run this is (from its rows) and its program's config; where the two share a name
    # (`seed`: the run's seed index, the config's base seed) the run's own value is the row's.
    ids = {k: v for k, v in (probe or ev).items() if not measurement(k)}
    row = {"workdir": workdir, **ids, **{k: v for k, v in config.items() if k not in ids},
           "step": step}
    row.update({k: number(v) for k, v in ev.items() if measurement(k)})
    row.update(late_rises(trained, row["run"]))
    row.update({k: (v if k.endswith("best_layer") else number(v)) for k, v in probe.items()
                if measurement(k)})
    if probe:
      row["lambda"] = lam
    out.append(row)
  return out


def collect(workdirs: list[str], lam: float | None = None, target: str = "z") -> list[dict]:
  """Rows of many workdirs; a missing or foreign workdir raises ConfigError naming it."""
  rows = []
  for wd in workdirs:
    if not os.path.isdir(wd):
      raise ConfigError("workdirs", f"{wd!r} does not exist or is not a directory")
    rows.extend(read_workdir(wd, lam, target))
  return rows
