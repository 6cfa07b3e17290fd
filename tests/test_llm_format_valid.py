"""format_valid: whether each scorer's answer is in its benchmark's format, right or wrong
(gsm8k / arith, exact_match / strings, evalplus / code), against hand-made answers."""

import pytest

from compgen_jax.llm_eval import gsm8k
from compgen_jax.llm_eval.benchmarks import BENCHMARKS, Problem
from tests.test_llm_eval_benchmarks import score_code


@pytest.mark.parametrize("completion, valid, flexible", [
    ("3 + 4 = 7\n#### 7", True, True),
    ("3 + 4 = 7\n#### 8", True, False),   # wrong, in format
    ("The answer is 7.", False, True),    # right by flexible-extract, not in format
    ("   ", False, False)])
def test_arith_format_valid_is_a_hashes_line_right_or_wrong(completion, valid, flexible):
  [row] = gsm8k.score([Problem("0", "", {"gold": "7"})], [completion], None)
  assert row["format_valid"] is valid and row["correct_flexible"] is flexible


@pytest.mark.parametrize("completion, valid", [
    (" cat", True), (" dog\nmore", True), ("   ", False), ("\ncat", False), ("", False)])
def test_strings_format_valid_is_a_non_empty_first_line(completion, valid):
  [row] = BENCHMARKS["strings"].score([Problem("0", "", {"gold": "cat"})], [completion], None)
  assert row["format_valid"] is valid
  assert row["correct"] is (completion.split("\n")[0].strip() == "cat")


@pytest.mark.parametrize("index, completion, valid", [
    (0, "    return a + b\n", True),
    (0, "    return a - b\n", True),     # wrong output, in format
    (0, "    return a // 0\n", True),    # raises, in format
    (0, "    return a +* b\n", False),   # sanitize drops it: the docstring alone
    (0, "", False),
    (1, "    return sum(values) / len(values)\n\n\nThis function divides", True)])
def test_code_format_valid_is_a_body_that_parses(index, completion, valid):
  assert score_code("humaneval_plus", index, completion)["format_valid"] is valid
