"""Drawing an experiment's result rows (means over seeds, min-max as error bars): each function
takes (axes, rows); `save` makes the figure and writes the PNG."""

from collections import defaultdict
from collections.abc import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _mean_by(rows: list[dict], keys: tuple[str, ...], value: str) -> dict:
  groups = defaultdict(list)
  for r in rows:
    groups[tuple(r[k] for k in keys)].append(float(r[value]))
  return {k: (np.mean(v), np.min(v), np.max(v)) for k, v in groups.items()}


def bars(keys: tuple[str, ...], value: str, title: str) -> Callable:
  """A bar per setting (`keys`) of the mean of `value`."""

  def draw(ax, rows: list[dict]) -> None:
    stats = _mean_by(rows, keys, value)
    labels = ["\n".join(str(p) for p in k) for k in stats]
    mean = np.array([v[0] for v in stats.values()])
    err = np.array([[v[0] - v[1] for v in stats.values()],
                    [v[2] - v[0] for v in stats.values()]])
    ax.bar(range(len(mean)), mean, yerr=err, capsize=3)
    ax.set_xticks(range(len(mean)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_title(title)
    ax.set_ylabel(value)

  return draw


def length(ax, rows: list[dict]) -> None:
  for model in dict.fromkeys(r["model"] for r in rows):
    stats = _mean_by([r for r in rows if r["model"] == model], ("length",), "exact_match")
    ax.plot([k[0] for k in stats], [v[0] for v in stats.values()], marker="o", ms=3,
            label=model)
  ax.set(xlabel="string length", ylabel="exact match", title="length generalization")
  ax.legend(fontsize=7)


def k_experts(ax, rows: list[dict]) -> None:
  stats = _mean_by(rows, ("k",), "exact_match")
  ks = [k[0] for k in stats]
  ax.plot(ks, [v[0] for v in stats.values()], marker="o", label="exact match")
  ax2 = ax.twinx()
  ax2.plot(ks, [v[0] for v in _mean_by(rows, ("k",), "mean_abs_log_z").values()], "r--",
           marker="s", label="mean |log Z_t|")
  ax2.set_ylabel("mean |log Z_t|", color="r")
  ax.set(xlabel="number of experts k", ylabel="exact match", title="composing k experts")


def arithmetic(ax, rows: list[dict]) -> None:
  stats = _mean_by(rows, ("regime",), "max_abs_logp_diff")
  ax.semilogy(range(len(stats)), [max(v[0], 1e-9) for v in stats.values()], marker="o")
  ax.set_xticks(range(len(stats)), [k[0] for k in stats])
  ax.set(xlabel="fine-tuned parameters", ylabel="max |log p_TA - log p_composed|",
         title="task arithmetic vs logit composition")


def save(draw: Callable, rows: list[dict], path: str) -> None:
  fig, ax = plt.subplots(figsize=(8, 4.5))
  draw(ax, rows)
  fig.tight_layout()
  fig.savefig(path, dpi=100, format="png")  # `path` may be a staged <name>.png.tmp
  plt.close(fig)
