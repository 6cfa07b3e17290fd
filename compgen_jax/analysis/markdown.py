"""Markdown pieces of the sweep report: tables, numbers with their spread, computed verdicts."""

import math

from compgen_jax.analysis import aggregate


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


REACH_DOUBLINGS = 10  # an extrapolation further than this past the last point is not printed


def reach(x: float, measured: list) -> str:
  """An aggregate.reach_at_last_gain cell: 'never', '-', the value ('(measured)' when it is one of
  the `measured` points: an extrapolation always lies past the last of them), or a bound when
  it lies more than REACH_DOUBLINGS doublings past the last point."""
  if math.isnan(x):
    return "-"
  if math.isinf(x):
    return "never"
  if measured and x > measured[-1] * 2**REACH_DOUBLINGS:  # a near-flat gain: no number to read
    return f"> {measured[-1] * 2**REACH_DOUBLINGS:,.0f} (over {REACH_DOUBLINGS} doublings)"
  return f"{x:,.0f}" + (" (measured)" if x in measured else "")


def text_cell(text: str) -> str:
  """Free text as one table cell: one line, a | escaped (it would end the cell)."""
  return " ".join(text.split()).replace("|", "\\|")


def table(header: list[str], rows: list[list]) -> str:
  """A GitHub markdown table; cells through fmt."""
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
  return "\n".join(lines)


def check(label: str, ok: bool | None, detail: str = "") -> str:
  """One computed verdict: '- label: **yes** (detail)'; None (too few seeds, runs or points,
  or an interval that holds the bar) -> 'not judged'."""
  return f"- {label}: **{word(ok)}**" + (f" ({detail})" if detail else "")


def word(ok: bool | None) -> str:
  return "not judged" if ok is None else ("yes" if ok else "no")


def judged(label: str, judgement) -> str:
  """check() of a verdicts.Judgement."""
  return check(label, judgement.ok, judgement.detail)


def verdict(label: str, word: str, detail: str = "") -> str:
  """A claim's summary line with its verdict word (shown / partial / not shown / not judged)."""
  return f"- {label}: **{word}**" + (f" ({detail})" if detail else "")


def fits_check(rows: list[dict], metric, bar: float, where: str = "") -> str:
  """How many runs fit their training tasks (ID >= bar): underfitting is not a gap. Beside it,
  how much the training-batch metric still rose over the last quarter of the steps (load.LATE):
  a rise says more steps would fit better. `where` opens the line (e.g. 'at 32,000 steps, ')."""
  ids = [v for v in aggregate.values(rows, metric.id_key) if not math.isnan(v)]
  detail = f"{sum(v >= bar for v in ids)} of {len(ids)} runs" if ids else "no ID metric in the rows"
  mean, sd, n = aggregate.summarize(
      aggregate.values(rows, metric.id_key.replace("id/", "late_rise/", 1)))
  if ids and n:
    detail += (f"; its change on the training batches over the last quarter of the steps: "
               f"{mean:+.3f}" + (f" ± {sd:.3f}" if sd else "") + f" over {n} runs")
  return check(f"{where}students fit their training tasks ({metric.label.replace('OOD', 'ID')} >= "
               f"{bar})", all(v >= bar for v in ids) if ids else None, detail)


def rules(*texts: str) -> str:
  """The rules a section's verdicts follow, stated before its numbers (after claim())."""
  return "**Rules:** " + "; ".join(texts) + ".\n\n**This run:**"


def cells(rows: list[dict], metric) -> list[str]:
  """ID, OOD and ID - OOD of a group of runs, each mean ± s.d. over them."""
  out = [mean_sd(*aggregate.summarize(aggregate.values(rows, k))[:2])
         for k in (metric.id_key, metric.key)]
  return out + [mean_sd(*aggregate.summarize(aggregate.gaps(rows, metric))[:2])]


def cell_header(metric) -> list[str]:
  return [metric.label.replace("OOD", "ID"), metric.label, "ID - OOD"]


def claim(text: str) -> str:
  """The paper's claim; rules() follows it, then this run's verdicts."""
  return f"**Paper:** {text}\n"


def figure(path: str, alt: str, caption: str = "") -> str:
  """An image on its own paragraph (a list after it stays a list), its caption under it."""
  return f"\n![{alt}]({path})\n" + (f"\n*{caption}*\n" if caption else "")
