"""The two Theorem 3.1 plots, drawn from the rows of theorem.jsonl alone."""

import matplotlib

matplotlib.use("Agg")  # files only; no display on the machines this runs on
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def error_vs_resolution(rows: list[dict], path: str) -> None:
  """log-log: measured sup error per teacher, the paper's and the sharp bound, an N^-2 guide."""
  err = [r for r in rows if r["kind"] == "error"]
  fig, ax = plt.subplots(figsize=(5.5, 4.2))
  for t in sorted({r["teacher"] for r in err}):
    rs = sorted((r for r in err if r["teacher"] == t), key=lambda r: r["resolution"])
    n = [r["resolution"] for r in rs]
    label = dict(measured="measured sup error", bound="bound (paper)", sharp="bound (sharp)")
    if t:
      label = dict.fromkeys(label, None)
    ax.plot(n, [r["sup_error"] for r in rs], "o-", color="C0", label=label["measured"])
    ax.plot(n, [r["bound"] for r in rs], "--", color="C3", label=label["bound"])
    ax.plot(n, [r["sharp_bound"] for r in rs], ":", color="C1", label=label["sharp"])
  n_all = np.asarray(sorted({r["resolution"] for r in err}), float)
  anchor = max(r["sup_error"] for r in err if r["resolution"] == n_all[0])
  ax.plot(n_all, anchor * (n_all / n_all[0]) ** -2.0, color="gray", lw=0.8, label=r"$N^{-2}$")
  ax.set(xscale="log", yscale="log", xlabel="N (ReLU units per square)",
         ylabel="sup |net - teacher|", title="Constructed network: error vs resolution")
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def neurons_vs_modules(rows: list[dict], path: str) -> None:
  """Neurons at fixed eps vs M (linear axes) and, log-scale, against the number of tasks."""
  count = sorted((r for r in rows if r["kind"] == "count"), key=lambda r: r["num_modules"])
  m = np.asarray([r["num_modules"] for r in count], float)
  neurons = [r["neurons"] for r in count]
  fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
  left.plot(m, neurons, "o-", label="constructed network")
  left.set(xlabel="M (modules)", ylabel="neurons",
           title=f"eps = {count[0]['eps']:g}, N = {count[0]['resolution']}")
  left.legend(fontsize=8)
  right.plot(m, neurons, "o-", label="constructed network (neurons)")
  right.plot(m, [r["num_tasks"] for r in count], "s--", label="tasks T(M, K)")
  right.plot(m, [r["memorising_neurons"] for r in count], "^:", label="T(M, K) x H (one teacher "
             "copy per task)")
  right.set(yscale="log", xlabel="M (modules)", ylabel="count", title="vs memorising all tasks")
  right.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
