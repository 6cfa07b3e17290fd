"""Runs the enabled letter experiments in a workdir and prints a summary table per experiment."""

import os
import time
from collections import defaultdict

import jax
import numpy as np

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.composition import checks, experiments, plots, suite

REGISTRY = {
    "substitution": (experiments.substitution, ("pair",), (
        "exact_match", "exact_match_all_sources", "mean_abs_log_z", "overlap", "ortho_cos")),
    "length": (experiments.length, ("model",), ("exact_match",)),
    "baselines": (experiments.baselines, ("pair", "method"), ("exact_match",
                                                              "exact_match_all_sources")),
    "background": (experiments.background, ("pair", "background"), (
        "exact_match", "exact_match_all_sources", "mean_abs_log_z")),
    "k_experts": (experiments.k_experts, ("k",), (
        "exact_match", "exact_match_all_sources", "num_all_sources", "mean_abs_log_z",
        "max_abs_log_z", "ortho_cos", "p_eos_at_eos")),
    "violations": (checks.violations, ("case",), (
        "exact_match_parallel", "exact_match_parallel_all_sources", "exact_match_sequential",
        "overlap", "ortho_cos", "mean_abs_log_z", "max_abs_log_z")),
    "arithmetic": (checks.arithmetic_equivalence, ("regime",), (
        "max_abs_logp_diff", "mean_tv", "exact_match_task_arithmetic",
        "exact_match_composition", "exact_match_composition_all_sources")),
}
assert tuple(REGISTRY) == suite.EXPERIMENTS


def summary(name: str, rows: list[dict], keys: tuple, values: tuple) -> str:
  """Mean over seeds (and, for the length table, over lengths) per setting, plus per-seed EM."""
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
  if name == "length":
    lines.append(length_table(rows))
  return "\n".join(lines)


def length_table(rows: list[dict]) -> str:
  models = list(dict.fromkeys(r["model"] for r in rows))
  lengths = sorted({r["length"] for r in rows})
  em = defaultdict(list)
  for r in rows:
    em[(r["model"], r["length"])].append(float(r["exact_match"]))
  lines = ["length | " + " | ".join(models)]
  lines += [f"{n} | " + " | ".join(f"{np.mean(em[(m, n)]):.3f}" for m in models)
            for n in lengths]
  return "\n".join(lines)


def run(cfg, workdir: str) -> dict[str, list[dict]]:
  """Validates, prepares the workdir, trains or restores the models, runs each experiment."""
  suite.validate(cfg)
  workdir_lib.prepare(workdir, cfg)
  start = time.time()
  zoo = suite.build_zoo(cfg, workdir)
  print(f"[models] ready after {time.time() - start:.0f} s", flush=True)
  ctx = experiments.Ctx(cfg, zoo)
  results = {}
  for name in suite.experiments(cfg):
    fn, keys, values = REGISTRY[name]
    t0 = time.time()
    rows = [{k: np.asarray(v) if isinstance(v, jax.Array) else v for k, v in r.items()}
            for r in fn(ctx)]
    out_dir = os.path.join(workdir, name)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "results.jsonl")
    if os.path.exists(path):  # a rerun rewrites its tables
      os.remove(path)
    metric_writer.append_rows(path, rows)
    plots.plot(name, rows, os.path.join(out_dir, "plot.png"))
    print(summary(name, rows, keys, values), flush=True)
    print(f"[{name}] {time.time() - t0:.0f} s (total {time.time() - start:.0f} s)", flush=True)
    results[name] = rows
  return results
