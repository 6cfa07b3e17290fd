"""The LLM report (llm_eval/report.py): each of the paper's numbers carries the protocol that
produced it, and the committed reports regenerate from their summary rows byte for byte."""

import glob
import os
import shutil

import pytest

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.llm_eval import report
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


COMMITTED = sorted(os.path.dirname(p) for pattern in ("*", os.path.join("*", "*"))
                   for p in glob.glob(os.path.join(REPO, "results", "cpu", "llm*", pattern,
                                                   workdir_lib.SUMMARY_FILE)))


@pytest.mark.parametrize("workdir", COMMITTED, ids=lambda p: os.path.relpath(p, REPO))
def test_committed_llm_reports_regenerate_byte_for_byte(workdir, tmp_path):
  shutil.copy(os.path.join(workdir, workdir_lib.SUMMARY_FILE), tmp_path)
  rows = metric_writer.read_rows(os.path.join(tmp_path, workdir_lib.SUMMARY_FILE))
  path = report.write(str(tmp_path), rows)
  with open(path) as new, open(os.path.join(workdir, workdir_lib.REPORT_FILE)) as old:
    assert new.read() == old.read()
