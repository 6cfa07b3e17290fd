"""Runs every (benchmark, system) of a config in a workdir, resumably, and writes the report.

WORKDIR/<benchmark>/<system>.jsonl holds one row per problem (completion, score, diagnostics),
appended a batch at a time; a rerun skips the problems already there, so an interrupted run
loses at most one batch. WORKDIR/summary.jsonl and report.md are rebuilt from those rows (the
report with the rows of any other seeds' experts scored in WORKDIR/seed_<s>/: comparisons.py).
"""

import os
import time

import ml_collections
import numpy as np

from compgen_jax import checks, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.composition import spec
from compgen_jax.llm_eval import baselines, benchmarks, comparisons, decoding, report, systems, tiny
from compgen_jax.types import CheckpointError, ConfigError

# score fields besides "correct" that the summary also averages: GSM8K strict-match and
# flexible-extract, MATH by the authors' string comparison, HumanEval+ / MBPP+ on the base
# inputs only
# Per-problem booleans summarized as fractions; `isolated`: whether generated code ran in the
# sandbox (evalplus.py), so a report can say which numbers were scored unisolated;
# `format_valid`: an answer in the benchmark's format, right or wrong (the study's check that
# its background knows the formats).
SECONDARY = {"correct_strict": "accuracy_strict", "correct_flexible": "accuracy_flexible",
             "correct_authors": "accuracy_authors", "base": "accuracy_base",
             "isolated": "scored_isolated", "format_valid": "format_valid"}


def validate(cfg: ml_collections.ConfigDict) -> list[systems.System]:
  """Everything checkable before a model is read: ConfigError / DataError naming the field."""
  checks.choices("run", cfg.run, benchmarks.BENCHMARKS, allow_empty=True)
  for name in cfg.run:
    benchmarks.BENCHMARKS[name].validate(cfg.benchmarks[name], f"benchmarks.{name}")
  if len(set(cfg.run)) != len(cfg.run):
    raise ConfigError("run", f"benchmarks repeat: {list(cfg.run)}")
  g = cfg.generate
  for field in ("max_new_tokens", "batch_size", "prefill_chunk", "pad_to"):
    checks.integer(f"generate.{field}", g[field], low=1)
  spec.validate_sampling(g, "generate")  # greedy decoding reads none of the sampling fields
  checks.integer("generate.draft_len", g.draft_len, low=0)
  checks.boolean("generate.stack_models", g.stack_models)
  checks.choice("dtype", cfg.dtype, ("float32", "bfloat16"))
  resolved = systems.resolve(cfg)
  baselines.validate(cfg, [s.name for s in resolved if s.kind == "baseline"],
                     {name: benchmarks.BENCHMARKS[name] for name in cfg.run})
  for name in systems.needed_models(resolved):
    path = cfg.models[name]
    if not path and not cfg.tiny_models.enabled:
      raise ConfigError(f"models.{name}", "no checkpoint directory given (a local Hugging "
                        "Face Gemma-2 directory; nothing is downloaded)")
    if path and not os.path.isfile(os.path.join(path, "config.json")):
      raise CheckpointError(f"models.{name}: {os.path.join(path, 'config.json')!r} not found")
  return resolved


def run_one(cfg, loaded, system: systems.System, bench_name: str, problems, workdir: str
            ) -> None:
  """Generates and scores the problems of one benchmark not yet in its results file."""
  bench = benchmarks.BENCHMARKS[bench_name]
  settings = cfg.benchmarks[bench_name]
  path = os.path.join(workdir, bench_name, f"{system.name}.jsonl")
  done = {r["id"] for r in metric_writer.read_rows(path)}  # a torn last line is dropped
  todo = [p for p in problems if p.id not in done]
  if not todo:
    return
  if system.kind == "baseline":
    if baselines.applies(system.name, bench):  # else: no rows, as for a benchmark not scored
      texts = baselines.completions(cfg, system.name, bench_name, bench, todo)
      metric_writer.append_rows(path, baseline_rows(system, todo, texts,
                                                    bench.score(todo, texts, settings)))
    return
  models, params = systems.system_params(cfg, loaded, system)
  bar = metric_writer.progress_bar(len(problems), len(problems) - len(todo),
                                   desc=f"{bench_name}/{system.name}")
  compose = cfg.compose if system.compose is None else system.compose  # its own step spec
  for idx, rows in decoding.completions(models, params, loaded.tokenizer,
                                        [p.prompt for p in todo], bench.stop_strings,
                                        cfg.generate, compose, cfg.seed,
                                        templates=system.templates, weights=system.weights,
                                        ids=[p.id for p in todo]):
    batch = [todo[i] for i in idx]
    scores = bench.score(batch, [r["completion"] for r in rows], settings)
    metric_writer.append_rows(path, [
        {"id": p.id, "system": system.name, **r, **s}
        for p, r, s in zip(batch, rows, scores, strict=True)])
    bar.update(len(idx))
  bar.close()


def baseline_rows(system: systems.System, problems, texts: list[str], scores: list[dict]
                  ) -> list[dict]:
  """A baseline's per-problem rows in a decoded system's format: nothing generated."""
  return [{"id": p.id, "system": system.name, "completion": t, "raw": t, "num_tokens": 0,
           "tokens": [], "finish": "baseline", "sum_p_eos": 0.0, **s}
          for p, t, s in zip(problems, texts, scores, strict=True)]


def model_paths(cfg, workdir: str, names: list[str], problems: dict) -> dict[str, str]:
  """{model name: checkpoint directory}: cfg.models, and with tiny_models on, the random
  models written into WORKDIR/models for every empty path (the same ones on every call)."""
  paths = dict(cfg.models)
  if cfg.tiny_models.enabled:
    texts = [p.prompt for ps in problems.values() for p in ps]
    paths.update(tiny.ensure_models(os.path.join(workdir, "models"), cfg.tiny_models,
                                    sorted((n for n in names if not paths[n]),
                                           key=lambda n: n != cfg.background),
                                    texts, cfg.seed))
  return paths


def run(cfg: ml_collections.ConfigDict, workdir: str) -> list[dict]:
  """Validates, prepares the workdir, loads the models, runs every benchmark x system, writes
  summary.jsonl and report.md; returns the summary rows."""
  resolved = validate(cfg)
  problems = {name: benchmarks.BENCHMARKS[name].load(cfg.benchmarks[name]) for name in cfg.run}
  workdir_lib.prepare(workdir, cfg)
  start = time.time()
  names = systems.needed_models(resolved)
  loaded = (systems.load(cfg, model_paths(cfg, workdir, names, problems), names, workdir)
            if names else None)  # None: baselines alone
  print(f"[models] {', '.join(names) or 'none'} ready after {time.time() - start:.0f} s",
        flush=True)
  for bench_name in cfg.run:
    for system in resolved:
      run_one(cfg, loaded, system, bench_name, problems[bench_name], workdir)
  rows = summarize(workdir, cfg, resolved)
  metric_writer.replace_step_rows(os.path.join(workdir, workdir_lib.SUMMARY_FILE), 0, rows)
  problems = comparisons.read(workdir)  # with any seed_<s>/ scored beside it
  path = report.write(workdir, rows, problems=problems)
  print(report.table(rows, comparisons.cells(problems)), flush=True)
  print(f"[done] {time.time() - start:.0f} s; report: {path}")
  return rows


def summarize(workdir: str, cfg, resolved: list[systems.System]) -> list[dict]:
  """One row per (benchmark, system): the headline accuracy and the decoding diagnostics,
  pooled over every generated token."""
  out = []
  for bench_name in cfg.run:
    for system in resolved:
      rows = sorted(metric_writer.read_rows(
          os.path.join(workdir, bench_name, f"{system.name}.jsonl")), key=lambda r: r["id"])
      if not rows:
        continue
      tokens = max(sum(r["num_tokens"] for r in rows), 1)
      row = {"step": 0, "benchmark": bench_name, "system": system.name, "kind": system.kind,
             "members": list(system.members), "num_problems": len(rows),
             "accuracy": float(np.mean([bool(r["correct"]) for r in rows])),
             "mean_tokens": tokens / len(rows),
             "finish_eos": float(np.mean([r["finish"] == "eos" for r in rows])),
             "finish_budget": float(np.mean([r["finish"] == "budget" for r in rows])),
             "mean_p_eos": sum(r["sum_p_eos"] for r in rows) / tokens}
      for field, name in SECONDARY.items():
        if field in rows[0]:
          row[name] = float(np.mean([bool(r[field]) for r in rows]))
      if system.kind == "composed":
        row["spec"] = spec.describe(spec.from_config(system.compose))
        both = np.sum([r["both_active_KxK"] for r in rows], axis=0) / tokens
        k = both.shape[0]
        row.update(
            active_frac_K=np.diag(both).tolist(),
            overlap=float(both[~np.eye(k, dtype=bool)].max(initial=0.0)),
            mean_abs_log_z=sum(r["sum_abs_log_z"] for r in rows) / tokens,
            max_abs_log_z=max(r["max_abs_log_z"] for r in rows),
            mean_p_eos_M=(np.sum([r["sum_p_eos_M"] for r in rows], axis=0) / tokens).tolist())
      out.append(row)
  return out
