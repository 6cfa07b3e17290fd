"""The sweep report's figures as PNGs: curves with error bars over seeds (ID dashed beside OOD),
grouped bars, per-layer profiles and a log-log plot of tasks needed with its fitted power law.
Panels of one figure share their y-axis; the y = 1 ceiling (and chance, where known) is drawn."""

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
# No software version or date in the PNG, so a regenerated figure is byte-identical.
METADATA = {"Software": None}
# A group keeps its colour whether or not the other one is present.
GROUP_COLORS = {"succeeding": "tab:green", "failing": "tab:red", "unfit": "tab:gray"}


class Series(NamedTuple):
  label: str
  x: list  # increasing
  mean: list
  sd: list  # s.d. over seeds (drawn as error bars only with >= 2 seeds)
  seeds: int = 1  # the fewest seeds behind any point
  id_mean: list | None = None  # the ID metric, drawn dashed in the same colour
  id_sd: list | None = None
  points: list | None = None  # per x, each seed's value: dots where the per-seed rule decides


def caption(seeds: int) -> str:
  """What the error bars are: 'mean ± s.d. over N seeds' or 'one seed, no error bars'."""
  return f"mean ± s.d. over {seeds} seeds" if seeds >= 2 else "one seed, no error bars"


def save(fig, path: str) -> str:
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fig.tight_layout()
  fig.savefig(path, dpi=120, metadata=METADATA)
  plt.close(fig)
  return path


def grid(n: int, width: float = 4.2, height: float = 3.4):
  cols = min(n, MAX_COLUMNS)
  rows = math.ceil(n / cols)
  fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False,
                           sharey=True)
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


def _ceilings(ax, chance: float | None) -> None:
  ax.axhline(1.0, color="black", lw=0.8, ls=":", label="ceiling 1")
  if chance is not None:
    ax.axhline(chance, color="gray", lw=0.8, ls="-.", label=f"chance {chance:g}")


def curves_png(panels: list[tuple[str, list[Series]]], path: str, xlabel: str, ylabel: str,
               xscale: str = "log", hline: float | None = None, chance: float | None = None,
               title: str = "") -> str:
  """One panel per (title, series); each series a line of means (s.d. error bars with >= 2
  seeds, its ID metric dashed) and a dashed horizontal line at `hline`, e.g. a target."""
  fig, axes = grid(len(panels))
  # A label keeps its colour in every panel (e.g. 'K = 3, width 32' wherever it appears).
  colors = {label: plt.cm.tab10(i % 10) for i, label in enumerate(
      dict.fromkeys(s.label for _, series in panels for s in series))}
  for ax, (panel, series) in zip(axes, panels, strict=True):
    for s in series:
      color = colors[s.label]
      bars = s.sd if s.seeds >= 2 else None
      ax.errorbar(s.x, s.mean, yerr=bars, marker="o", ms=4, capsize=3, color=color,
                  label=s.label)
      for x, seeds in zip(s.x, s.points or [], strict=False):
        ax.plot([x] * len(seeds), seeds, ".", color=color, ms=3, alpha=0.5)
      if s.id_mean is not None:
        ax.errorbar(s.x, s.id_mean, yerr=s.id_sd if s.seeds >= 2 else None, ls="--", lw=1,
                    marker=".", capsize=2, color=color, alpha=0.7)
    if any(s.id_mean is not None for s in series):
      ax.plot([], [], "k--", lw=1, label="ID (dashed)")
    ax.set_xscale("log", base=2) if xscale == "log2" else ax.set_xscale(xscale)
    if xscale in ("log", "log2"):
      _plain_ticks(ax, sorted({x for s in series for x in s.x}))
    _ceilings(ax, chance)
    if hline is not None:
      ax.axhline(hline, color="gray", ls="--", lw=0.8, label=f"target {hline:g}")
    ax.set_title(panel, fontsize=10)
    ax.set_xlabel(xlabel)
    has_id = any(s.id_mean is not None for s in series)
    ax.set_ylabel(f"{ylabel} (ID dashed)" if has_id else ylabel)
    ax.yaxis.set_tick_params(labelleft=True)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
  if title:
    fig.suptitle(title, fontsize=10)
  return save(fig, path)


class Bar(NamedTuple):
  label: str  # the legend entry (colour)
  mean: float
  sd: float
  seeds: int = 1
  note: str = ""  # written on the bar, e.g. "n=12" training tasks
  paper: float | None = None  # the paper's value, drawn as a marker
  id_mean: float | None = None  # the ID metric of the same runs, drawn as a tick on the bar


def bars_png(categories: list[str], bars: dict[str, list[Bar]], path: str, ylabel: str,
             title: str = "", legend: str = "", chance: float | None = None) -> str:
  """Grouped bars: per category one bar per entry, coloured by label; error bars only with
  >= 2 seeds, each bar's note above it and the paper's value as a black diamond."""
  labels = list(dict.fromkeys(b.label for entries in bars.values() for b in entries))
  colors = {label: plt.cm.tab10(i % 10) for i, label in enumerate(labels)}
  fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(categories)), 4.2))
  handles = {}
  for i, category in enumerate(categories):
    entries = bars.get(category, [])
    width = 0.8 / max(len(entries), 1)
    for j, b in enumerate(entries):
      x = i - 0.4 + width * (j + 0.5)
      handles[b.label] = ax.bar(x, b.mean, width * 0.9, yerr=b.sd if b.seeds >= 2 else None,
                                capsize=3, color=colors[b.label])
      if b.note:
        top = (b.mean if math.isfinite(b.mean) else 0) + (b.sd if b.seeds >= 2 else 0)
        ax.text(x, top + 0.02, b.note, ha="center",
                va="bottom", fontsize=6, rotation=90)
      if b.paper is not None:
        handles["paper"] = ax.scatter([x], [b.paper], marker="D", color="black", s=18, zorder=4)
      if b.id_mean is not None and math.isfinite(b.id_mean):
        handles["ID"] = ax.hlines(b.id_mean, x - width * 0.45, x + width * 0.45,
                                  color="black", lw=1.5, zorder=4)
  names = labels + [n for n in ("paper", "ID") if n in handles]
  ax.legend([handles[n] for n in names], names, fontsize=8, title=legend or None,
            loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: bars reach the ceiling
  ax.set_xticks(range(len(categories)), categories, rotation=25, ha="right", fontsize=8)
  ax.set_ylabel(ylabel)
  ax.set_title(title, fontsize=10)
  ax.axhline(0, color="black", lw=0.5)
  _ceilings(ax, chance)
  ax.grid(alpha=0.3, axis="y")
  return save(fig, path)


def layers_png(panels: list[tuple[str, list[Series]]], path: str, ylabel: str,
               title: str = "") -> str:
  """Per panel (e.g. a depth) a profile over layer positions per series (e.g. failing and
  succeeding runs); x holds layer names."""
  fig, axes = grid(len(panels))
  for ax, (panel, series) in zip(axes, panels, strict=True):
    for i, s in enumerate(series):
      color = GROUP_COLORS.get(s.label.split(" ")[0], plt.cm.tab10(i % 10))
      ax.errorbar(range(len(s.x)), s.mean, yerr=s.sd if s.seeds >= 2 else None, marker="o",
                  capsize=3, color=color, label=s.label)
    names = max((s.x for s in series), key=len, default=[])
    ax.set_xticks(range(len(names)), names, rotation=20, fontsize=8)
    _ceilings(ax, None)
    ax.set_title(panel, fontsize=10)
    ax.set_ylabel(ylabel)
    ax.yaxis.set_tick_params(labelleft=True)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
  if title:
    fig.suptitle(title, fontsize=10)
  return save(fig, path)


def law_png(points: dict[str, tuple[list, list, list]], fits: dict[str, PowerLaw], path: str,
            title: str, seeds: dict[str, tuple[list, list]] | None = None) -> str:
  """Log-log tasks needed (y) against total tasks T (x) per label, open markers for upper
  bounds, each label's fitted power law, y = T (every task) for reference, and each seed's own
  crossing as a small dot where given (`seeds`: label -> (T, tasks needed))."""
  fig, ax = plt.subplots(figsize=(5.2, 4.2))
  all_t = [t for ts, _, _ in points.values() for t in ts]
  for i, (label, (ts, ns, bounds)) in enumerate(points.items()):
    color = plt.cm.tab10(i % 10)
    if seeds and seeds.get(label):
      ax.scatter(*seeds[label], color=color, s=8, alpha=0.5, zorder=2,
                 label=f"{label}: each seed")
    ts, ns, bounds = np.asarray(ts), np.asarray(ns), np.asarray(bounds, bool)
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
    ax.set_xscale("log")  # (no points: a log axis would have no range)
    ax.set_yscale("log")
    _plain_log_labels(ax.xaxis)
    _plain_log_labels(ax.yaxis)
  ax.set_xlabel("total number of tasks T(M, K)")
  ax.set_ylabel("training tasks needed")
  ax.set_title(title, fontsize=9)
  ax.grid(alpha=0.3, which="both")
  if all_t:
    ax.legend(fontsize=7)
  return save(fig, path)
