"""Learning curves of a workdir's metrics.jsonl as one PNG."""

import collections
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from compgen_jax import metric_writer  # noqa: E402
from compgen_jax import workdir as workdir_lib  # noqa: E402

PANELS = (("train/loss", "training loss", True), ("r2", "R^2 (ID dashed, OOD solid)", False),
          ("acc", "accuracy (ID dashed, OOD solid)", False))


def _series(rows: list[dict], key: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
  by_run = collections.defaultdict(list)
  for row in rows:
    if key in row and isinstance(row[key], int | float):
      by_run[row["run"]].append((row["step"], row[key]))
  return {r: tuple(np.asarray(v, float).T) for r, v in by_run.items()}


def _label(row: dict) -> str:
  """The run's own fields a family's rows carry (a language model's: the seed alone)."""
  return ", ".join(f"{name} {row[key]:g}" for key, name in (
      ("seed", "seed"), ("frac_ood", "frac"), ("learning_rate", "lr")) if key in row)


def plot_curves(workdir: str, filename: str = workdir_lib.CURVES_FILE) -> str | None:
  """Writes loss and ID/OOD metric curves per run; returns the path (None without rows)."""
  rows = metric_writer.read_rows(os.path.join(workdir, workdir_lib.METRICS_FILE))
  if not rows:
    return None
  labels = {row["run"]: _label(row) for row in rows}
  panels = [p for p in PANELS if any(k.endswith(p[0]) for k in rows[-1])]
  fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.8), squeeze=False)
  for ax, (key, title, log) in zip(axes[0], panels, strict=True):
    for run, color in zip(sorted(labels), plt.cm.tab10.colors * 10, strict=False):
      if key == "train/loss":
        steps, values = _series(rows, key).get(run, ([], []))
        ax.plot(steps, values, color=color, lw=0.8, label=labels[run])
        continue
      for split, style in (("id", "--"), ("ood", "-")):
        steps, values = _series(rows, f"{split}/{key}").get(run, ([], []))
        ax.plot(steps, values, style, color=color, marker=".", label=f"{labels[run]} {split}")
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
