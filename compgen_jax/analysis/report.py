"""Text tables of run results."""

import math
import os

import numpy as np

from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import fields, load


def table(header: list[str], rows: list[list]) -> str:
  """A plain aligned text table."""
  cells = [header] + [[_fmt(c) for c in row] for row in rows]
  widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
  lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
  lines.insert(1, "  ".join("-" * w for w in widths))
  return "\n".join(lines)


def _fmt(v) -> str:
  if isinstance(v, float):
    return "nan" if math.isnan(v) else f"{v:.4g}"
  return str(v)


def eval_table(rows: list[dict]) -> str:
  """An evaluation pass's rows: step, run and every metric the evaluators wrote, in the rows'
  order, but the losses (what training minimised; the table shows what the evaluators measure)."""
  keys = fields.present(rows, lambda k: load.measurement(k) and not k.endswith("/loss"))
  return table(["step", "run", *keys], [[r["step"], r["run"], *(r.get(k, "") for k in keys)]
                                        for r in rows])


def final_table(rows: list[dict], workdir: str) -> str:
  """Final metrics per run, their mean, and where the files are."""
  if not rows:
    return f"no final rows in {workdir}"
  metric_keys = sorted(k for k in rows[0] if load.measurement(k)
                       and not k.startswith(load.TRAIN_PREFIX)) + ["train/loss"]
  # the run's own fields (seed, swept values, split sizes), whichever family wrote the rows
  run_keys = [k for k in rows[0] if not load.measurement(k) and k not in ("run", "step")]
  header = ["run", *run_keys, *metric_keys]
  body = [[r["run"], *(r.get(k, "") for k in run_keys), *(float(r.get(k, math.nan))
                                                  for k in metric_keys)] for r in rows]
  means = ["mean", *([""] * len(run_keys)),
           *(float(np.nanmean([float(r.get(k, math.nan)) for r in rows])) for k in metric_keys)]
  files = "\n".join(f"  {name}: {os.path.join(workdir, name)}"
                    for name in (workdir_lib.CONFIG_FILE, workdir_lib.METRICS_FILE,
                                 workdir_lib.CHECKPOINT_DIR, workdir_lib.CURVES_FILE)
                    if os.path.exists(os.path.join(workdir, name)))
  return f"{table(header, body + [means])}\n\nfiles in {workdir}:\n{files}"
