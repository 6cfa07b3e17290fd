"""The sweep report's figures as PNGs: curves with error bars over seeds, grouped bars, and a
log-log plot of tasks needed with its fitted power law."""

import math
import os
from typing import NamedTuple

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib import ticker  # noqa: E402

from compgen_jax.analysis.aggregate import PowerLaw  # noqa: E402

MAX_COLUMNS = 4


class Series(NamedTuple):
  label: str
  x: list  # increasing
  mean: list
  sd: list  # error bar half-widths (0 with one seed)


def save(fig, path: str) -> str:
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
  return path


def _grid(n: int, width: float = 4.2, height: float = 3.4):
  cols = min(n, MAX_COLUMNS)
  rows = math.ceil(n / cols)
  fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
  for ax in axes.flat[n:]:
    ax.set_visible(False)
  return fig, list(axes.flat[:n])


def _plain_log_labels(axis) -> None:
  """Log-axis tick labels as plain numbers (20, 30, 100), not 2 x 10^1."""
  axis.set_major_formatter(ticker.LogFormatter())
  axis.set_minor_formatter(ticker.LogFormatter(minor_thresholds=(2, 0.5)))


def _plain_ticks(ax, xs: list) -> None:
  """Log x ticks at the data when there are few, else plain-number labels of the defaults."""
  if len(xs) <= 10:
    kept = []
    for x in xs:  # labels of nearby values (32 and 35 tasks) would overlap: keep the first
      if x > 0 and (not kept or x / kept[-1] >= 1.3):
        kept.append(x)
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xticks(kept, [f"{x:g}" for x in kept])
  else:
    _plain_log_labels(ax.xaxis)


def curves_png(panels: list[tuple[str, list[Series]]], path: str, xlabel: str, ylabel: str,
               xscale: str = "log", hline: float | None = None) -> str:
  """One panel per (title, series); each series a line of means with s.d. error bars (and a
  dashed horizontal line at `hline`, e.g. a target)."""
  fig, axes = _grid(len(panels))
  for ax, (title, series) in zip(axes, panels, strict=True):
    for s in series:
      ax.errorbar(s.x, s.mean, yerr=s.sd, marker="o", ms=4, capsize=3, label=s.label)
    ax.set_xscale("log", base=2) if xscale == "log2" else ax.set_xscale(xscale)
    if xscale in ("log", "log2"):
      _plain_ticks(ax, sorted({x for s in series for x in s.x}))
    if hline is not None:
      ax.axhline(hline, color="gray", ls="--", lw=0.8, label=f"target {hline:g}")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, which="both")
    if any(s.label for s in series):
      ax.legend(fontsize=7)
  return save(fig, path)


def bars_png(categories: list[str], bars: dict[str, list[tuple[str, float, float]]], path: str,
             ylabel: str, title: str = "", legend: str = "") -> str:
  """Grouped bars: per category, one bar (label, mean, sd) per entry, coloured by label."""
  labels = list(dict.fromkeys(label for entries in bars.values() for label, _, _ in entries))
  colors = {label: plt.cm.tab10(i % 10) for i, label in enumerate(labels)}
  fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(categories)), 4.0))
  handles = {}
  for i, category in enumerate(categories):
    entries = bars.get(category, [])
    width = 0.8 / max(len(entries), 1)
    for j, (label, mean, sd) in enumerate(entries):
      handles[label] = ax.bar(i - 0.4 + width * (j + 0.5), mean, width * 0.9, yerr=sd,
                              capsize=3, color=colors[label])
  ax.legend([handles[label] for label in labels], labels, fontsize=8, title=legend or None)
  ax.set_xticks(range(len(categories)), categories, rotation=25, ha="right", fontsize=8)
  ax.set_ylabel(ylabel)
  ax.set_title(title, fontsize=10)
  ax.axhline(0, color="black", lw=0.5)
  ax.grid(alpha=0.3, axis="y")
  return save(fig, path)


def law_png(points: dict[str, tuple[list, list, list]], fits: dict[str, PowerLaw], path: str,
            title: str) -> str:
  """Log-log tasks needed (y) against total tasks T (x) per label, open markers for upper
  bounds, each label's fitted power law, and y = T (every task) for reference."""
  fig, ax = plt.subplots(figsize=(5.2, 4.2))
  all_t = [t for ts, _, _ in points.values() for t in ts]
  for i, (label, (ts, ns, bounds)) in enumerate(points.items()):
    color = plt.cm.tab10(i % 10)
    ts, ns, bounds = map(np.asarray, (ts, ns, bounds))
    ax.scatter(ts[~bounds], ns[~bounds], color=color, label=label, zorder=3)
    ax.scatter(ts[bounds], ns[bounds], facecolors="none", edgecolors=color, zorder=3)
    fit = fits.get(label)
    if fit is not None and math.isfinite(fit.exponent) and ts.size:
      grid = np.geomspace(min(ts), max(ts), 50)
      ax.plot(grid, fit.prefactor * grid ** fit.exponent, color=color, lw=1,
              label=f"{label} fit: {fit.prefactor:.2g} T^{fit.exponent:.2f}")
  if all_t:
    grid = np.geomspace(min(all_t), max(all_t), 50)
    ax.plot(grid, grid, "k--", lw=0.8, label="all T tasks")
  ax.set_xscale("log")
  ax.set_yscale("log")
  _plain_log_labels(ax.xaxis)
  _plain_log_labels(ax.yaxis)
  ax.set_xlabel("total number of tasks T(M, K)")
  ax.set_ylabel("training tasks needed")
  ax.set_title(title, fontsize=9)
  ax.grid(alpha=0.3, which="both")
  ax.legend(fontsize=7)
  return save(fig, path)
