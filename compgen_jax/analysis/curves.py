"""Learning curves of a workdir's metrics.jsonl as one PNG."""

import collections
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from compgen_jax import metric_writer  # noqa: E402
from compgen_jax import workdir as workdir_lib  # noqa: E402
from compgen_jax.analysis import fields, load  # noqa: E402

PANELS = (("train/loss", "training loss", True), ("r2", "R^2 (ID dashed, OOD solid)", False),
          ("acc", "accuracy (ID dashed, OOD solid)", False))


def _series(rows: list[dict], key: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
  by_run = collections.defaultdict(list)
  for row in rows:
    if key in row and isinstance(row[key], int | float):
      by_run[row["run"]].append((row["step"], row[key]))
  return {r: tuple(np.asarray(v, float).T) for r, v in by_run.items()}


# Short names of the run fields most families carry, labelled first where a run has them.
NAMED = (("seed", "seed"), ("frac_ood", "frac"), ("learning_rate", "lr"))


def labels(rows: list[dict]) -> dict:
  """{run: its legend label}: the NAMED fields its rows carry (a language model's: the seed
  alone), then every other run field, sorted, that tells apart runs the label so far does not
  (a field the others determine, n_train given frac_ood, or one all runs share adds nothing)."""
  last = {row["run"]: row for row in rows}  # a run's own fields, from its last row
  shown = [key for key, _ in NAMED]
  run_fields = fields.present(list(last.values()), lambda k: not load.measurement(k))
  for key in fields.ordered(run_fields, left_out=(*shown, "run", "step")):
    seen: dict = {}  # label so far -> the key's values under it
    for row in last.values():
      seen.setdefault(tuple(repr(row.get(k)) for k in shown), set()).add(repr(row.get(key)))
    if any(len(values) > 1 for values in seen.values()):
      shown.append(key)
  names = dict(NAMED)
  return {run: ", ".join(f"{names.get(k, k)} {_text(row[k])}" for k in shown if k in row)
          for run, row in last.items()}


def _text(value) -> str:
  return f"{value:g}" if isinstance(value, int | float) and not isinstance(value, bool) else (
      str(value))


def plot_curves(workdir: str, filename: str = workdir_lib.CURVES_FILE) -> str | None:
  """Writes loss and ID/OOD metric curves per run; returns the path (None without rows)."""
  rows = metric_writer.read_rows(os.path.join(workdir, workdir_lib.METRICS_FILE))
  if not rows:
    return None
  legend = labels(rows)
  panels = [p for p in PANELS if any(k.endswith(p[0]) for k in rows[-1])]
  fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.8), squeeze=False)
  for ax, (key, title, log) in zip(axes[0], panels, strict=True):
    for run, color in zip(sorted(legend), plt.cm.tab10.colors * 10, strict=False):
      if key == "train/loss":
        steps, values = _series(rows, key).get(run, ([], []))
        ax.plot(steps, values, color=color, lw=0.8, label=legend[run])
        continue
      for split, style in (("id", "--"), ("ood", "-")):
        steps, values = _series(rows, f"{split}/{key}").get(run, ([], []))
        ax.plot(steps, values, style, color=color, marker=".", label=f"{legend[run]} {split}")
    ax.set_title(title)
    ax.set_xlabel("step")
    if log:
      ax.set_yscale("log")
    ax.grid(alpha=0.3)
  axes[0][0].legend(fontsize=7)
  fig.tight_layout()
  path = os.path.join(workdir, filename)
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path
