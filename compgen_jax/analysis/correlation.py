"""Decodability vs compositional generalization across runs: Pearson r, R^2, table and scatter."""

import math
import os

import numpy as np

from compgen_jax import metric_writer
from compgen_jax.analysis import aggregate, correlations, load, plots
from compgen_jax.analysis import report as report_lib

TABLE_FILE = "decodability.jsonl"
SCATTER_FILE = "decodability_vs_ood_r2.png"


def pearson(x, y) -> tuple[float, float]:
  """(r, r^2) over the pairs where both are finite; NaN with < 3 pairs or a constant side."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  ok = np.isfinite(x) & np.isfinite(y)
  x, y = x[ok], y[ok]
  if x.size < 3 or np.std(x) == 0 or np.std(y) == 0:
    return math.nan, math.nan
  r = float(np.corrcoef(x, y)[0, 1])
  return r, r * r


def decodability_vs_generalization(rows: list[dict], x_key: str = load.DECODABILITY,
                                   y_key: str = "ood/r2") -> dict:
  """{n, r, r2}: correlation of best-layer decodability with OOD R^2 across runs."""
  x = [load.number(r.get(x_key)) for r in rows]
  y = [load.number(r.get(y_key)) for r in rows]
  r, r2 = pearson(x, y)
  n = int(np.sum(np.isfinite(x) & np.isfinite(y)))
  return {"n": n, "r": r, "r2": r2, "x": x_key, "y": y_key}


def _layer_columns(rows: list[dict], target: str) -> list[str]:
  cols = []
  for r in rows:
    cols += [k for k in r if k.startswith(f"{target}/") and k.endswith("/ood_r2")
             and k not in cols]
  return cols


def differing(rows: list[dict]) -> list[str]:
  """The keys that tell the runs apart, whichever family, student or encoding they come from:
  the run fields and config keys (no measurements) taking more than one value over `rows`."""
  keys = dict.fromkeys(k for r in rows for k in r if not load.measurement(k)
                       and k not in ("workdir", "run", "seed", "step", "lambda"))
  return [k for k in keys if len({repr(r.get(k)) for r in rows}) > 1]


def text_table(rows: list[dict], target: str = "z") -> str:
  """Runs x (what tells them apart, OOD R^2, OOD probe R^2 per layer) as an aligned text
  table."""
  header = ["workdir", "run", "seed", *differing(rows), "ood/r2", f"{target}/best_layer",
            *_layer_columns(rows, target)]
  body = [[os.path.basename(os.path.normpath(r["workdir"])),
           *(load.number(r.get(k)) if r.get(k) is None or isinstance(r.get(k), float)
             else r.get(k) for k in header[1:])] for r in rows]
  return report_lib.table(header, body)


def write_report(workdirs: list[str], out_dir: str, lam: float | None = None,
                 target: str = "z") -> str:
  """Collects the workdirs, writes TABLE_FILE and SCATTER_FILE into out_dir; returns a summary."""
  rows = load.collect(workdirs, lam, target)
  os.makedirs(out_dir, exist_ok=True)
  table_path = os.path.join(out_dir, TABLE_FILE)
  if os.path.exists(table_path):
    os.remove(table_path)  # the report is derived data: rewrite it whole
  metric_writer.append_rows(table_path, rows)
  corr = decodability_vs_generalization(rows, f"{target}/best/ood_r2")
  scatter = plots.scatter_png(
      [load.number(r.get(corr["x"])) for r in rows], [load.number(r.get("ood/r2")) for r in rows],
      os.path.join(out_dir, SCATTER_FILE), xlabel=f"decodability ({corr['x']})",
      ylabel="OOD R^2", title=f"Pearson r = {corr['r']:.3f}, R^2 = {corr['r2']:.3f} "
      f"(n = {corr['n']})", groups=[str(r.get("encoding.name") or "") for r in rows])
  c = correlations.correlation(*(aggregate.values(rows, k) for k in (corr["x"], "ood/r2")))
  return (f"{text_table(rows, target)}\n\n"
          f"decodability vs OOD R^2 across {corr['n']} runs: Pearson r = {corr['r']:.4f} "
          + (f"(95% Fisher-z interval [{c.low:.4f}, {c.high:.4f}])" if math.isfinite(c.low)
             else "(no interval: fewer than 4 runs)") + f", R^2 = {corr['r2']:.4f}\n"
          f"files:\n  {table_path}\n  {scatter}")
