"""The image-composition experiment: train every program (one per sweep.width value; seeds x
coverage vmapped inside each), evaluate and probe its checkpoints, and write the report."""

import os
import time

import ml_collections

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.images import evaluate, probes
from compgen_jax.images import report as report_lib
from compgen_jax.images import train as train_lib
from compgen_jax.types import ConfigError

MODES = ("train", "evaluate", "report", "all")
TIMINGS_FILE = "timings.jsonl"


def programs(cfg: ml_collections.ConfigDict, workdir: str) -> list[tuple[str, str, object]]:
  """(name, workdir, config) per program: WORKDIR/width-<w>/ per sweep.width value (it sets
  model.width, or model.channels for the conv model), else WORKDIR itself."""
  widths = tuple(cfg.sweep.width)
  if not widths:
    return [(os.path.basename(os.path.normpath(workdir)), workdir, cfg)]
  out = []
  for w in widths:
    sub = ml_collections.ConfigDict(cfg.to_dict())
    sub.model["channels" if cfg.model.name == "conv" else "width"] = int(w)
    sub.sweep.width = ()
    sub.lock()
    out.append((f"width-{w}", os.path.join(workdir, f"width-{w}"), sub))
  return out


def validate(cfg: ml_collections.ConfigDict, workdir: str, mode: str) -> list:
  """Every program's config and splits checked before anything is written."""
  if mode not in MODES:
    raise ConfigError("mode", f"unknown {mode!r}; allowed: {', '.join(MODES)}")
  if any(int(w) < 1 for w in cfg.sweep.width):
    raise ConfigError("sweep.width", f"widths must be >= 1, got {tuple(cfg.sweep.width)}")
  progs = programs(cfg, workdir)
  for _, _, sub in progs:
    train_lib.validate(sub)
    probes.validate(sub)
    train_lib.host_splits(sub, train_lib.run_grid(sub))
  if mode in ("evaluate", "report") and not workdir_lib.check(workdir, cfg):
    raise ConfigError("workdir", f"{workdir!r} holds no run of this config: train it first "
                      "(--mode=train or all)")
  return progs


def _timed(workdir: str, program: str, phase: str, fn):
  start = time.time()
  out = fn()
  metric_writer.append_rows(os.path.join(workdir, TIMINGS_FILE), [
      {"program": program, "phase": phase, "seconds": round(time.time() - start, 1)}])
  return out


def run(cfg: ml_collections.ConfigDict, workdir: str, mode: str = "all",
        step: int | None = None, every: bool = False) -> str:
  """Runs `mode` (train | evaluate | report | all); returns a text summary. Evaluation and
  probes take the latest checkpoint, `step`, or (`every`) all of them."""
  progs = validate(cfg, workdir, mode)
  if mode in ("train", "all"):
    workdir_lib.prepare(workdir, cfg)
    for name, sub_dir, sub in progs:
      _timed(workdir, name, "train", lambda sub=sub, d=sub_dir: train_lib.train(sub, d))
  if mode in ("evaluate", "all"):
    for name, sub_dir, sub in progs:
      _timed(workdir, name, "evaluate",
             lambda sub=sub, d=sub_dir: evaluate.evaluate_workdir(sub, d, step, every=every))
      _timed(workdir, name, "probe",
             lambda sub=sub, d=sub_dir: probes.probe_workdir(sub, d, step, every))
  if mode in ("report", "all"):
    path = report_lib.write(workdir)
    return f"{report_lib.summary(workdir)}\n\nreport: {path}"
  return f"{mode} done: {', '.join(d for _, d, _ in progs)}"
