"""The image-composition experiment, one program (one model shape; seeds x coverage vmapped
inside it): train, evaluate and probe its checkpoints (experiments/train.py, evaluate.py,
probe.py). A shape-changing axis (model width) is one program per value, launched by
experiments/sweep.py (configs/sweeps/images.py); the report (images/report.py, experiments/report.py
--dir) reads every program under a directory."""

import os
import time

import ml_collections

from compgen_jax import checks, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.images import evaluate, probes
from compgen_jax.images import train as train_lib
from compgen_jax.types import ConfigError

MODES = ("train", "evaluate", "probe")
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


def run(cfg: ml_collections.ConfigDict, workdir: str, mode: str, step: int | None = None,
        every: bool = False) -> str:
  """Runs `mode` (train, evaluate, probe) on the program in `workdir`; returns a line saying
  so. Evaluation and probes take the latest checkpoint, `step`, or (`every`) all of them."""
  checks.choice("mode", mode, MODES)
  validate_program(cfg)
  if mode != "train" and not workdir_lib.check(workdir, cfg):
    raise ConfigError("workdir", f"{workdir!r} holds no run of this config: train it first "
                      "(experiments/train.py)")
  if mode == "train":  # the loop makes (or checks) the workdir
    _timed(workdir, "train", lambda: train_lib.train(cfg, workdir))
  elif mode == "evaluate":
    _timed(workdir, "evaluate",
           lambda: evaluate.evaluate_workdir(cfg, workdir, step, every=every))
  else:
    _timed(workdir, "probe", lambda: probes.probe_workdir(cfg, workdir, step, every))
  return f"{mode} done: {workdir}"
