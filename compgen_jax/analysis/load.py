"""Workdir files -> tables: one row per run with its config values, OOD R^2 and probe R^2 per layer.

Reads config.json, metrics.jsonl, eval.jsonl and probes.jsonl only (never checkpoints).
"""

import math
import os

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.types import ConfigError

RUN_KEYS = ("run", "seed", "frac_ood", "n_train", "n_ood", "learning_rate", "weight_decay")
CONFIG_FIELDS = ("task.family", "task.num_modules", "task.max_hotness", "task.support",
                 "encoding.name", "encoding.inn_init_scale", "student.name",
                 "student.mlp.width", "student.mlp.depth", "train.num_steps")
EVAL_KEYS = ("id/r2", "ood/r2", "id/acc", "ood/acc", "id/acc_all", "ood/acc_all")
DECODABILITY = "z/best/ood_r2"  # OOD probe R^2 of z at the student layer best by ID probe R^2
# A run's training-batch metric train/<m> at its last logged step minus at the last logged step
# <= LATE of it, as row key late_rise/<m>: still rising at the end means more steps would fit
# the training tasks better (underfitting by steps, not by capacity).
LATE = 0.75


def config_values(cfg: dict) -> dict:
  """The CONFIG_FIELDS of a config dict (None where a family / student has no such field)."""
  out = {}
  for field in CONFIG_FIELDS:
    value = cfg
    for part in field.split("."):
      value = value.get(part) if isinstance(value, dict) else None
    out[field] = value
  return out


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


def late_rises(metric_rows: list[dict], run: int) -> dict:
  """{late_rise/<m>: train/<m> at the last logged step - at the last logged step <= LATE of it}
  of one run's training rows (nothing for a key logged at fewer than two steps)."""
  out = {}
  keys = {k for r in metric_rows if r.get("run") == run for k in r if k.startswith("train/")}
  for key in sorted(keys):
    by_step = {r["step"]: number(r[key]) for r in metric_rows if r.get("run") == run and key in r}
    last = max(by_step)
    early = [s for s in by_step if s <= LATE * last]
    if early:
      out["late_rise/" + key.removeprefix("train/")] = by_step[last] - by_step[max(early)]
  return out


def eval_rows(workdir: str, metric_rows: list[dict]) -> list[dict]:
  """Evaluation rows: the standalone eval.jsonl, then the in-training evaluations (of the
  workdir's metrics.jsonl rows, read once by the caller)."""
  evals = metric_writer.read_rows(os.path.join(workdir, workdir_lib.EVAL_FILE))
  trained = [r for r in metric_rows if "ood/r2" in r or "ood/acc" in r]
  return trained + evals  # later rows win in _latest


def read_workdir(workdir: str, lam: float | None = None, target: str = "z") -> list[dict]:
  """One row per run at the last probed step (the last evaluated step if never probed).

  lam picks the probe's lambda (default: the first one in probes.jsonl).
  """
  cfg = workdir_lib.load_config(workdir).to_dict()
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
  out = []
  for run in sorted({r["run"] for r in source if r["step"] == step}):
    probe = _latest(probe_rows, step, run, f"{target}/best/ood_r2") or {}
    ev = _latest(evals, step, run, "ood/r2") or _latest(evals, step, run, "ood/acc") or {}
    base = probe or ev
    row = {"workdir": workdir, **{k: base.get(k) for k in RUN_KEYS}, **config_values(cfg),
           "step": step}
    row.update({k: number(ev.get(k)) for k in EVAL_KEYS if k in ev})
    row.update(late_rises(trained, row["run"]))
    row.update({k: (v if k.endswith("best_layer") else number(v)) for k, v in probe.items()
                if k.startswith(f"{target}/")})
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
