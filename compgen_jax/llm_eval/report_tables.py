"""The score report's layout of summary rows by benchmark and system (`grid`, every table of
report.py reads it) and its section on answer formats (issue 55): the answers in each
benchmark's format, right or wrong (the scorers' `format_valid`), and the check that the
study's background knows every format.
"""

from compgen_jax.analysis import markdown


def grid(rows: list[dict]) -> tuple[list[str], list[str], dict]:
  """(benchmarks, systems, {(benchmark, system): row}) in the rows' order."""
  benches = list(dict.fromkeys(r["benchmark"] for r in rows))
  systems = list(dict.fromkeys(r["system"] for r in rows))
  return benches, systems, {(r["benchmark"], r["system"]): r for r in rows}


# The study's check that its background knows every answer format (issue 55): format-valid on
# at least this fraction of each benchmark's problems
FORMAT_BAR = 0.9


def format_section(rows: list[dict]) -> str:
  """Per benchmark and system, the answers in the benchmark's format (right or wrong), and
  whether the background ("base") passes FORMAT_BAR on every benchmark; "" when the rows were
  scored before the field existed."""
  rows = [r for r in rows if "format_valid" in r]
  if not rows:
    return ""
  benches, systems, at = grid(rows)
  body = [[b, *(f"{100 * at[b, s]['format_valid']:.1f}" if (b, s) in at else "-"
                for s in systems)] for b in benches]
  base = {b: at[b, "base"]["format_valid"] for b in benches if (b, "base") in at}
  check = ("" if not base else
           "The background's answers in format: "
           + ", ".join(f"{b} {100 * v:.1f}%" for b, v in base.items())
           + f"; at least {100 * FORMAT_BAR:.0f}% on every benchmark (a background that "
           f"knows the formats): **{'yes' if min(base.values()) >= FORMAT_BAR else 'no'}**.")
  return "\n\n".join(filter(None, [
      "## Answers in the benchmark's format",
      "Fraction (%) of answers in the benchmark's format, right or wrong: arith a \"#### n\" "
      "line, strings a non-empty first line, code a body that parses and defines the entry "
      "point.", markdown.table(["benchmark"] + systems, body), check]))
