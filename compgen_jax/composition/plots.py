"""One PNG per experiment, from its result rows alone (means over seeds, min-max as error bars)."""

from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _mean_by(rows: list[dict], keys: tuple[str, ...], value: str) -> dict:
  groups = defaultdict(list)
  for r in rows:
    groups[tuple(r[k] for k in keys)].append(float(r[value]))
  return {k: (np.mean(v), np.min(v), np.max(v)) for k, v in groups.items()}


def _bars(ax, stats: dict, title: str, ylabel: str) -> None:
  labels = ["\n".join(str(p) for p in k) for k in stats]
  mean = np.array([v[0] for v in stats.values()])
  err = np.array([[v[0] - v[1] for v in stats.values()], [v[2] - v[0] for v in stats.values()]])
  ax.bar(range(len(mean)), mean, yerr=err, capsize=3)
  ax.set_xticks(range(len(mean)), labels, rotation=60, ha="right", fontsize=7)
  ax.set_title(title)
  ax.set_ylabel(ylabel)


def plot(name: str, rows: list[dict], path: str) -> None:
  fig, ax = plt.subplots(figsize=(8, 4.5))
  if name == "length":
    for model, stats in _series(rows, "model", "length", "exact_match").items():
      ax.plot(stats[0], stats[1], marker="o", ms=3, label=model)
    ax.set(xlabel="string length", ylabel="exact match", title="length generalization")
    ax.legend(fontsize=7)
  elif name == "k_experts":
    stats = _mean_by(rows, ("k",), "exact_match")
    ks = [k[0] for k in stats]
    ax.plot(ks, [v[0] for v in stats.values()], marker="o", label="exact match")
    ax2 = ax.twinx()
    ax2.plot(ks, [v[0] for v in _mean_by(rows, ("k",), "mean_abs_log_z").values()], "r--",
             marker="s", label="mean |log Z_t|")
    ax2.set_ylabel("mean |log Z_t|", color="r")
    ax.set(xlabel="number of experts k", ylabel="exact match", title="composing k experts")
  elif name == "arithmetic":
    stats = _mean_by(rows, ("regime",), "max_abs_logp_diff")
    ax.semilogy(range(len(stats)), [max(v[0], 1e-9) for v in stats.values()], marker="o")
    ax.set_xticks(range(len(stats)), [k[0] for k in stats])
    ax.set(xlabel="fine-tuned parameters", ylabel="max |log p_TA - log p_composed|",
           title="task arithmetic vs logit composition")
  else:
    keys, value = {"substitution": (("pair",), "exact_match"),
                   "baselines": (("pair", "method"), "exact_match"),
                   "background": (("pair", "background"), "exact_match"),
                   "violations": (("case",), "mean_abs_log_z")}[name]
    _bars(ax, _mean_by(rows, keys, value), name, value)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def _series(rows, group: str, x: str, y: str) -> dict:
  out = {}
  for g in dict.fromkeys(r[group] for r in rows):
    stats = _mean_by([r for r in rows if r[group] == g], (x,), y)
    out[g] = ([k[0] for k in stats], [v[0] for v in stats.values()])
  return out
