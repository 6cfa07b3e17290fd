"""Runs the enabled letter experiments in a workdir and prints a summary table per experiment.

Each experiment's rows replace <workdir>/<name>/results.jsonl (and plot.png) by an atomic rename
of a staged file, so a failure never leaves a half-written or missing table.
"""

import os
import time
from collections import defaultdict

import jax
import numpy as np

from compgen_jax import files, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.letters import config, plots, registry, zoo
from compgen_jax.letters.context import Ctx

RESULTS_FILE, PLOT_FILE = "results.jsonl", "plot.png"


def summary(name: str, rows: list[dict], keys: tuple, values: tuple) -> str:
  """Mean over seeds (and, for the length table, over lengths) per setting, plus per-seed values
  of the first column."""
  groups = defaultdict(list)
  for r in rows:
    groups[tuple(r[k] for k in keys)].append(r)
  lines = [f"== {name} ==", " | ".join(keys + values + ("per seed",))]
  for k, rs in groups.items():
    means = [f"{np.mean([float(r[v]) for r in rs]):.4g}" for v in values]
    per_seed = defaultdict(list)
    for r in rs:
      per_seed[r["seed"]].append(float(r[values[0]]))
    seeds = ",".join(f"{np.mean(v):.4f}" for _, v in sorted(per_seed.items()))
    lines.append(" | ".join([str(x) for x in k] + means + [seeds]))
  return "\n".join(lines)


def run(cfg, workdir: str) -> dict[str, list[dict]]:
  """Validates, prepares the workdir, trains or restores the models, runs each experiment."""
  config.validate(cfg)
  workdir_lib.prepare(workdir, cfg)
  start = time.time()
  models = zoo.build_zoo(cfg, workdir, registry.scratch_tasks(cfg), registry.finetune_runs(cfg))
  print(f"[models] ready after {time.time() - start:.0f} s", flush=True)
  results = {}
  for name, rows in run_experiments(cfg, models, start):
    commit(stage(workdir, name, rows))  # each as soon as it is done
    results[name] = rows
  return results


def run_experiments(cfg, models: zoo.Zoo, start: float):
  """Yields (name, rows) for each of cfg.experiments in turn, printing its summary."""
  ctx = Ctx(cfg, models)
  for name in cfg.experiments:
    exp, t0 = registry.EXPERIMENTS[name], time.time()
    rows = [{k: np.asarray(v) if isinstance(v, jax.Array) else v for k, v in r.items()}
            for r in exp.run(ctx)]
    print(summary(name, rows, exp.group_by, exp.summary_keys), flush=True)
    if exp.table is not None:
      print(exp.table(rows), flush=True)
    print(f"[{name}] {time.time() - t0:.0f} s (total {time.time() - start:.0f} s)", flush=True)
    yield name, rows


def stage(workdir: str, name: str, rows: list[dict]) -> list[str]:
  """Writes an experiment's rows and plot beside <workdir>/<name>/results.jsonl and plot.png
  (files.staged); returns those final paths for `commit`."""
  out_dir = os.path.join(workdir, name)
  results, plot = os.path.join(out_dir, RESULTS_FILE), os.path.join(out_dir, PLOT_FILE)
  metric_writer.append_rows(files.staged(results), rows)
  plots.save(registry.EXPERIMENTS[name].plot, rows, files.staged(plot))
  return [results, plot]


def commit(paths: list[str]) -> None:
  """Moves the staged files over `paths` (files.commit)."""
  files.commit(*paths)
