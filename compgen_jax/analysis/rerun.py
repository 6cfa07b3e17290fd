"""A rerun of a results dir against the committed one: does it give the committed numbers?

Per experiment folder present in both, every run file of the committed side (what a report
reads: compgen_jax/workdir.py's ROW_FILES, and any other *.jsonl, such as the theorem's rows) is
compared with the rerun's file of the same relative path: the same bytes, else the largest
absolute difference of any number in it (rows paired in order; a file whose rows, keys or
strings do not pair is "different in structure"; TIMING_KEYS are left out). Each claim of the
two claims.json is paired by its text and its verdicts compared, and a sweep's REPORT.md above
its runs section (wall times) compared as text: every number and verdict in it. Figures and
index.json (timestamps, paths) are not compared, nor config.json's `app` (CONFIG_ONLY_KEYS).
"""

import json
import math
import os
import re

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import claims as claims_lib
from compgen_jax.analysis import markdown as md
from compgen_jax.analysis.sweep_report import CLAIMS_FILE, METRICS, REPORT_FILE, RUNS_HEADING
from compgen_jax.types import ConfigError

TIMING_KEYS = ("wall_s",)  # a row's seconds: never the same twice
# config.json's name of the application (configs name it since issue 58; which code runs the
# program, not its setting): a config written before has none
CONFIG_ONLY_KEYS = ("app",)
# A committed rerun's comparison (RESULTS/reruns/<machine>/DIFF_FILE, experiments/rerun_diff.py)
DIFF_FILE = "rerun_diff.md"
# The evaluation metrics a report's verdicts read (sweep_report.METRICS: OOD and ID of each).
HEADLINE_KEYS = frozenset(k for m in METRICS.values() for k in (m.key, m.id_key) if k)
SKIPPED_DIRS = (workdir_lib.CHECKPOINT_DIR, workdir_lib.TENSORBOARD_DIR, "logs", "slurm")


def run_files(experiment_dir: str) -> list[str]:
  """Relative paths of the run files under an experiment folder, sorted."""
  out = []
  for root, dirs, names in os.walk(experiment_dir):
    dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
    out += [os.path.relpath(os.path.join(root, n), experiment_dir) for n in names
            if n in workdir_lib.ROW_FILES or n.endswith(".jsonl")]
  return sorted(out)


def _is_number(x) -> bool:
  return isinstance(x, (int, float)) and not isinstance(x, bool)


def differences(a, b, key: str = "") -> list[tuple[float, str]] | None:
  """(|a - b|, key path) of every pair of numbers of two JSON values, or None if they do not
  pair: other keys, lengths, strings or types. NaN pairs with NaN (difference 0); a number with
  NaN gives inf."""
  if _is_number(a) and _is_number(b):
    if math.isnan(a) or math.isnan(b):
      return [(0.0, key) if math.isnan(a) and math.isnan(b) else (math.inf, key)]
    return [(abs(float(a) - float(b)), key)]
  if isinstance(a, dict) and isinstance(b, dict):
    if set(a) != set(b):
      return None
    pairs = [(a[k], b[k], f"{key}.{k}" if key else str(k)) for k in sorted(a)]
  elif isinstance(a, list) and isinstance(b, list):
    if len(a) != len(b):
      return None
    pairs = [(x, y, f"{key}[{i}]") for i, (x, y) in enumerate(zip(a, b, strict=True))]
  else:
    return [] if type(a) is type(b) and a == b else None
  out = []
  for x, y, k in pairs:
    found = differences(x, y, k)
    if found is None:
      return None
    out += found
  return out


def _largest(found: list[tuple[float, str]]) -> tuple[float, str]:
  """The largest (|a - b|, key path) of differences; (0.0, '') when there is none."""
  return max([(0.0, ""), *found], key=lambda t: t[0])


def _untimed(value):
  return ({k: _untimed(v) for k, v in value.items() if k not in TIMING_KEYS}
          if isinstance(value, dict) else value)


def _read(path: str):
  if path.endswith(".jsonl"):
    return [_untimed(r) for r in metric_writer.read_rows(path)]
  with open(path) as f:
    value = _untimed(json.load(f))
  if os.path.basename(path) == workdir_lib.CONFIG_FILE and isinstance(value, dict):
    value = {k: v for k, v in value.items() if k not in CONFIG_ONLY_KEYS}
  return value


def _leaf(key: str) -> str:
  """'[3].ood/r2' or '[3].ood/r2[1]' -> 'ood/r2' (the row's own key)."""
  return re.sub(r"(\[\d+\])+$", "", key).rpartition(".")[2]


def headline(key: str) -> bool:
  """A key whose number a report's verdicts read: an evaluation metric or a probe's R^2."""
  leaf = _leaf(key)
  return leaf in HEADLINE_KEYS or leaf.endswith("_r2")


def compare_file(committed: str, rerun: str) -> dict:
  """{status: identical (the same bytes or, but TIMING_KEYS, the same numbers) | numbers |
  structure | missing, diff, key, headline_diff}."""
  if not os.path.exists(rerun):
    return {"status": "missing"}
  with open(committed, "rb") as f, open(rerun, "rb") as g:
    if f.read() == g.read():
      return {"status": "identical", "diff": 0.0, "headline_diff": 0.0}
  found = differences(_read(committed), _read(rerun))
  if found is None:
    return {"status": "structure"}
  worst = _largest(found)
  if worst[0] == 0:  # the same numbers in other bytes (TIMING_KEYS, number formatting)
    return {"status": "identical", "diff": 0.0, "headline_diff": 0.0}
  return {"status": "numbers", "diff": worst[0], "key": _leaf(worst[1]),
          "headline_diff": _largest([d for d in found if headline(d[1])])[0]}


def _claims(experiment_dir: str) -> list[dict]:
  path = os.path.join(experiment_dir, CLAIMS_FILE)
  return claims_lib.read_claims(path) if os.path.exists(path) else []


def _findings(experiment_dir: str) -> str | None:
  """A sweep REPORT.md's text above its runs section (None without a REPORT.md)."""
  path = os.path.join(experiment_dir, REPORT_FILE)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return f.read().partition("\n" + RUNS_HEADING + "\n")[0]


def compare_report(committed: str, rerun: str) -> str:
  """'same', 'differs at line N' (the first), 'missing' (in the rerun) or '-' (no report)."""
  ours, theirs = _findings(committed), _findings(rerun)
  if ours is None:
    return "-"
  if theirs is None:
    return "missing"
  if ours == theirs:
    return "same"
  a, b = ours.split("\n"), theirs.split("\n")
  first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
               min(len(a), len(b)))
  return f"differs at line {first + 1}"


def compare_experiment(committed: str, rerun: str) -> dict:
  """One experiment folder's comparison: per-file results, the report and the claims' verdicts."""
  files = {rel: compare_file(os.path.join(committed, rel), os.path.join(rerun, rel))
           for rel in run_files(committed)}
  ours, theirs = _claims(committed), _claims(rerun)
  pairs = claims_lib.paired(ours, theirs)
  verdicts = [{"claim": a["claim"], "committed": a["verdict"], "rerun": b["verdict"],
               "committed_ours": a["ours"], "rerun_ours": b["ours"]} for a, b in pairs]
  return {"files": files, "verdicts": verdicts, "report": compare_report(committed, rerun),
          "claims_missing": sorted({r["claim"] for r in ours} - {a["claim"] for a, _ in pairs})}


def compare(committed_dir: str, rerun_dir: str, experiments: list[str] | None = None) -> dict:
  """{experiment: its comparison} for every experiment folder of committed_dir that rerun_dir
  also has (or the named ones, each required in both); a ConfigError before any reading if a
  dir or a named experiment is missing."""
  for name, d in (("committed", committed_dir), ("rerun", rerun_dir)):
    if not os.path.isdir(d):
      raise ConfigError(name, f"{d!r} is not a directory")
  present = sorted(e for e in os.listdir(committed_dir)
                   if os.path.isdir(os.path.join(committed_dir, e)))
  if experiments:
    for e in experiments:
      for name, d in (("committed", committed_dir), ("rerun", rerun_dir)):
        if not os.path.isdir(os.path.join(d, e)):
          raise ConfigError("experiments", f"{e!r}: no such folder in the {name} dir {d!r}")
    present = list(experiments)
  return {e: compare_experiment(os.path.join(committed_dir, e), os.path.join(rerun_dir, e))
          for e in present if os.path.isdir(os.path.join(rerun_dir, e))}


def _fmt(x: float) -> str:
  return "0" if x == 0 else f"{x:.1e}"


def summary(experiment: str, result: dict) -> dict:
  """The table row of one experiment's comparison."""
  files = result["files"].values()
  count = {s: sum(f["status"] == s for f in files)
           for s in ("identical", "numbers", "structure", "missing")}
  numbers = [(f["diff"], rel, f["key"]) for rel, f in result["files"].items()
             if f["status"] == "numbers"]
  worst = max(numbers, default=None)
  changed = [v for v in result["verdicts"] if v["committed"] != v["rerun"]]
  return {
      "experiment": experiment,
      "files": len(result["files"]),
      "identical": count["identical"],
      "numbers": count["numbers"],
      "unpaired": count["structure"] + count["missing"],
      "largest": "-" if worst is None else f"{_fmt(worst[0])} ({worst[2]}, {worst[1]})",
      "headline": _fmt(max((f.get("headline_diff", 0.0) for f in files), default=0.0)),
      "verdicts": f"{len(result['verdicts']) - len(changed)} of {len(result['verdicts'])}",
      "report": result["report"],
      "ok": not changed and not result["claims_missing"] and not count["structure"]
            and not count["missing"],
  }


def render(results: dict) -> tuple[str, bool]:
  """(markdown: a table of the experiments, then every changed verdict and unpaired file;
  whether every verdict and file paired and every verdict is the same)."""
  rows = [summary(e, r) for e, r in results.items()]
  lines = [md.table(
      ["experiment", "run files", "byte for byte", "numbers differ", "missing or unpaired",
       "largest difference (key, file)", "largest R^2 / accuracy difference",
       "same verdict", "REPORT.md but its runs section"],
      [[r["experiment"], r["files"], r["identical"], r["numbers"], r["unpaired"], r["largest"],
        r["headline"], r["verdicts"], r["report"]] for r in rows])]
  for e, r in results.items():
    for v in r["verdicts"]:
      if v["committed"] != v["rerun"]:
        lines.append(f"- {e}: \"{v['claim']}\": committed {v['committed']} ({v['committed_ours']})"
                     f", rerun {v['rerun']} ({v['rerun_ours']})")
    lines += [f"- {e}: claim missing in the rerun: \"{c}\"" for c in r["claims_missing"]]
    lines += [f"- {e}/{rel}: {f['status']}" for rel, f in r["files"].items()
              if f["status"] in ("structure", "missing")]
  return "\n".join(lines) + "\n", all(r["ok"] for r in rows)
