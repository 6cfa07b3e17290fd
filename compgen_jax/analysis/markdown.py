"""Markdown pieces of the sweep report: tables, numbers with their spread, computed verdicts."""

import math


def fmt(value, digits: int = 3) -> str:
  """A cell: floats to `digits` decimals ('-' for NaN / None), everything else as str."""
  if value is None:
    return "-"
  if isinstance(value, float):
    return "-" if math.isnan(value) else f"{value:.{digits}f}"
  return str(value)


def mean_sd(mean: float, sd: float, digits: int = 3) -> str:
  """'0.912 ± 0.004' ('0.912' with one seed, '-' for NaN)."""
  if mean is None or math.isnan(mean):
    return "-"
  if sd is None or math.isnan(sd) or sd == 0:
    return f"{mean:.{digits}f}"
  return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def table(header: list[str], rows: list[list]) -> str:
  """A GitHub markdown table; cells through fmt."""
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
  return "\n".join(lines)


def check(label: str, ok: bool | None, detail: str = "") -> str:
  """One computed verdict: '- label: **yes** (detail)'; None (not enough data) -> 'n/a'."""
  word = "n/a" if ok is None else ("yes" if ok else "no")
  return f"- {label}: **{word}**" + (f" ({detail})" if detail else "")


def claim(text: str) -> str:
  return f"**Paper:** {text}\n\n**This run:**"


def figure(path: str, alt: str) -> str:
  """An image on its own paragraph (a list after it stays a list)."""
  return f"\n![{alt}]({path})\n"
