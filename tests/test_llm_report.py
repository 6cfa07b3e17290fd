"""The LLM report (llm_eval/report.py): each of the paper's numbers carries the protocol that
produced it, and the committed reports regenerate from their summary rows byte for byte."""

import glob
import math
import os
import shutil

import pytest

from compgen_jax import workdir as workdir_lib
from compgen_jax.llm_eval import evaluate_report, report, report_tables
from tests.helpers import REPO

SYSTEMS = ("base", "math", "coding", "composed", "task_arithmetic")


def _rows(benches):
  return [{"step": 0, "benchmark": b, "system": s, "kind": "single", "members": [s],
           "num_problems": 10, "accuracy": 0.1 * i, "mean_tokens": 5.0, "finish_eos": 1.0,
           "finish_budget": 0.0, "mean_p_eos": 0.1}
          for b in benches for i, s in enumerate(SYSTEMS)]


def test_each_paper_number_says_which_protocol_produced_it(tmp_path):
  text = open(report.write(str(tmp_path), _rows(("gsm8k", "humaneval_plus", "arith")))).read()
  # GSM8K: the models alone zero-shot with the authors' extractor (a), the composition 8-shot
  # through lm-eval (b); HumanEval+: one protocol (d) for all four
  for cell in ("0.0 [3.2 a]", "10.0 [50.2 a]", "20.0 [3.2 a]", "30.0 [41.2 b]",
               "0.0 [3.7 d]", "30.0 [30.5 d]"):
    assert cell in text
  assert "| 40.0 |" in text  # task arithmetic: no paper number, no letter
  lines = text.splitlines()
  for letter in "abd":
    assert any(line.startswith(f"- {letter}: ") for line in lines)
  assert not any(line.startswith("- c: ") for line in lines)  # MATH is not in this table
  assert "The paper's gsm8k row mixes protocols" in text
  assert "Ours: every system of a benchmark is scored by one protocol" in text
  one = report.protocol_note(_rows(("mbpp_plus",)))
  assert "- d: " in one and "mixes" not in one
  assert report.protocol_note(_rows(("arith", "funcs"))) == ""  # no paper numbers: no note


def test_predictors_table_counts_the_solved_and_bolds_intervals_apart_from_half():
  def row(bench, q, auc, low, high, failures=20, successes=10):
    text = (f"{auc:.3f} [{low:.3f}, {high:.3f}]" if successes >= 5 else
            f"not testable: {successes} successes")
    return {"benchmark": bench, "system": "composed", "quantity": q, "auc": auc, "low": low,
            "high": high, "failures": failures, "successes": successes, "text": text}
  nan = "nan"  # as metric_writer writes a NaN and reads it back
  preds = [row("arith", "a", 0.7, 0.6, 0.8), row("arith", "b", 0.55, 0.45, 0.65),
           row("arith", "c", 0.3, 0.2, 0.45),
           *(row("funcs", q, nan, nan, nan, 40, 0) for q in "abc")]
  lines = evaluate_report.predictors_table(preds).splitlines()
  assert lines[0] == "| benchmark | composition | solved | a | b | c |"
  assert lines[2] == ("| arith | composed | 10 of 30 | **0.700 [0.600, 0.800]** | "
                      "0.550 [0.450, 0.650] | **0.300 [0.200, 0.450]** |")
  assert lines[3] == "| funcs | composed | 0 of 40 | " + " | ".join(
      ["not testable: 0 successes"] * 3) + " |"


def test_the_verdict_table_names_what_survives_holm_and_states_the_rule():
  def row(system, q, low, high, p):
    return {"benchmark": "arith", "system": system, "quantity": q, "auc": (low + high) / 2,
            "low": low, "high": high, "p": p, "failures": 20, "successes": 10,
            "text": f"{(low + high) / 2:.3f} [{low:.3f}, {high:.3f}]" if math.isfinite(low)
            else "not testable: 0 successes"}
  nan = float("nan")
  preds = [row("composed", "a", 0.6, 0.8, 0.001), row("composed", "b", 0.2, 0.4, 0.02),
           row("composed_3", "a", 0.55, 0.75, 0.03), row("composed_3", "b", 0.4, 0.6, 0.4),
           *(row("composed_4", q, nan, nan, nan) for q in "ab")]
  lines = evaluate_report.verdict_table(preds).splitlines()
  # Holm over two: 0.001 < 0.05 / 2, then 0.02 < 0.05 / 1; 0.03 > 0.05 / 2 stops
  assert lines[2] == ("| arith | composed | **yes** | 2 | a 0.700 [0.600, 0.800], p = 0.001, "
                      "larger on failed problems; b 0.300 [0.200, 0.400], p = 0.020, smaller "
                      "on failed problems |")
  assert lines[3] == "| arith | composed_3 | **no** | 2 | - |"
  assert lines[4] == "| arith | composed_4 | **not testable** | 0 | - |"
  section = evaluate_report.section([], preds)
  assert "survives Holm's step-down correction" in section and "family-wise 0.05" in section
  assert section.endswith(evaluate_report.verdict_table(preds))


COMMITTED = sorted(os.path.dirname(p) for pattern in ("*", os.path.join("*", "*"))
                   for p in glob.glob(os.path.join(REPO, "results", "cpu", "llm*", pattern,
                                                   workdir_lib.SUMMARY_FILE)))


@pytest.mark.parametrize("workdir", COMMITTED, ids=lambda p: os.path.relpath(p, REPO))
def test_committed_llm_reports_regenerate_byte_for_byte(workdir, tmp_path):
  """From the summary and per-problem rows, and the evaluate pass's per-problem rows where it
  ran (its summary and predictors recomputed from them: one seed, the files it wrote)."""
  copy = str(tmp_path / "w")
  shutil.copytree(workdir, copy, ignore=shutil.ignore_patterns(
      workdir_lib.REPORT_FILE, "*.png", workdir_lib.CONFIG_FILE,
      workdir_lib.DIAGNOSTICS_SUMMARY_FILE, workdir_lib.PREDICTORS_FILE))
  path = report.rewrite(copy)
  with open(path) as new, open(os.path.join(workdir, workdir_lib.REPORT_FILE)) as old:
    assert new.read() == old.read()


def test_the_format_section_tables_every_system_and_checks_the_background():
  def row(bench, system, valid):
    return dict(benchmark=bench, system=system, format_valid=valid)
  rows = [row("arith", "base", 0.95), row("arith", "arith", 1.0),
          row("funcs", "base", 0.9), row("funcs", "arith", 0.25)]
  text = report_tables.format_section(rows)
  assert "| arith | 95.0 | 100.0 |" in text and "| funcs | 90.0 | 25.0 |" in text
  assert "arith 95.0%, funcs 90.0%" in text and "**yes**" in text  # 0.9 is at the bar
  rows[2] = row("funcs", "base", 0.895)
  assert "**no**" in report_tables.format_section(rows)
  # rows scored before the field existed (every committed report): no section
  assert report_tables.format_section([dict(benchmark="arith", system="base")]) == ""
