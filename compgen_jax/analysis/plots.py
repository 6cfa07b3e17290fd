"""PNG plots made from jsonl rows alone: a metric over checkpoints, and decodability vs OOD R^2."""

import math
import re

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # noqa: E402

from compgen_jax.analysis import figures  # noqa: E402


def _value(row: dict, key: str) -> float:
  return float(row.get(key, math.nan))  # jsonl stores non-finite floats as "nan"


def curve_png(rows: list[dict], path: str, key: str = "ood/r2") -> str:
  """`key` over steps, one line per run (rows: step, run, key)."""
  fig, ax = plt.subplots(figsize=(5, 3.5))
  for run in sorted({r["run"] for r in rows}):
    points = sorted((r["step"], _value(r, key)) for r in rows if r["run"] == run and key in r)
    ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=f"run {run}")
  ax.set_xlabel("step")
  ax.set_ylabel(key)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  return figures.save(fig, path)


def _natural(label: str) -> list:
  """'width=32' before 'width=128': the numbers inside a label sort as numbers."""
  return [(0, float(t), "") if re.fullmatch(r"\d+(\.\d+)?", t) else (1, 0.0, t)
          for t in re.split(r"(\d+(?:\.\d+)?)", label)]


def scatter_png(x: list[float], y: list[float], path: str, xlabel: str, ylabel: str,
                title: str = "", groups: list[str] | None = None) -> str:
  """A scatter of y against x, coloured by group label if given."""
  fig, ax = plt.subplots(figsize=(4.5, 4))
  groups = groups or [""] * len(x)
  for g in sorted(set(groups), key=_natural):
    pts = [(a, b) for a, b, gg in zip(x, y, groups, strict=True) if gg == g]
    ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=18, label=g or None)
  ax.axhline(1.0, color="black", lw=0.8, ls=":")  # the R^2 / accuracy ceiling
  if any(groups):
    ax.legend(fontsize=7)
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.set_title(title, fontsize=9)
  ax.grid(alpha=0.3)
  return figures.save(fig, path)
