"""The image-composition experiment, one program (one model shape; seeds x coverage vmapped
inside it): train, evaluate and probe its checkpoints, and write the report. A shape-changing
axis (model width) is one program per value, launched by experiments/sweep.py
(configs/sweeps/images.py); the report reads every program under a directory."""

import os
import time

import ml_collections

from compgen_jax import checks, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.images import evaluate, probes
from compgen_jax.images import report as report_lib
from compgen_jax.images import train as train_lib
from compgen_jax.types import ConfigError

MODES = ("train", "evaluate", "probe", "report", "all")
TIMINGS_FILE = "timings.jsonl"


def validate_program(cfg: ml_collections.ConfigDict) -> None:
  """The program's config and splits, checked before anything is written (the sweep launcher
  runs this too, for every program before any starts)."""
  train_lib.validate(cfg)
  probes.validate(cfg)
  train_lib.host_splits(cfg, train_lib.run_grid(cfg))


def _timed(workdir: str, phase: str, fn):
  start = time.time()
  out = fn()
  metric_writer.append_rows(os.path.join(workdir, TIMINGS_FILE),
                            [{"phase": phase, "seconds": round(time.time() - start, 1)}])
  return out


def run(cfg: ml_collections.ConfigDict | None, workdir: str, mode: str = "all",
        step: int | None = None, every: bool = False) -> str:
  """Runs `mode` on the program in `workdir`; returns a text summary. Evaluation and probes
  take the latest checkpoint, `step`, or (`every`) all of them. `report` needs no config: it
  reads the jsonl files of `workdir`, one program or a directory of them (a sweep dir)."""
  checks.choice("mode", mode, MODES)
  if mode == "report":
    path = report_lib.write(workdir)
    return f"{report_lib.summary(workdir)}\n\nreport: {path}"
  if cfg is None:
    raise ConfigError("config", f"--mode={mode} needs --config (only report reads the files "
                      "alone)")
  validate_program(cfg)
  if mode in ("evaluate", "probe") and not workdir_lib.check(workdir, cfg):
    raise ConfigError("workdir", f"{workdir!r} holds no run of this config: train it first "
                      "(--mode=train or all)")
  if mode in ("train", "all"):  # the loop makes (or checks) the workdir
    _timed(workdir, "train", lambda: train_lib.train(cfg, workdir))
  if mode in ("evaluate", "all"):
    _timed(workdir, "evaluate",
           lambda: evaluate.evaluate_workdir(cfg, workdir, step, every=every))
  if mode in ("probe", "all"):
    _timed(workdir, "probe", lambda: probes.probe_workdir(cfg, workdir, step, every))
  if mode == "all":
    path = report_lib.write(workdir)
    return f"{report_lib.summary(workdir)}\n\nreport: {path}"
  return f"{mode} done: {workdir}"
