"""The four benchmarks of the logit-composition paper: prompts, answer extraction and scoring."""

import json
import os
import time

import pytest

from compgen_jax.llm_eval import evalplus, gsm8k, hendrycks_math, sandbox
from compgen_jax.llm_eval.benchmarks import BENCHMARKS, Problem, truncate
from compgen_jax.types import ConfigError, DataError
from tests.helpers import REPO

FIXTURES = os.path.join(REPO, "tests", "fixtures", "llm_eval")
FILES = {
    "gsm8k": dict(path="gsm8k_test.jsonl", fewshot_path="gsm8k_train.jsonl"),
    "math": dict(path="math_test.jsonl"),
    "humaneval_plus": dict(path="humaneval_plus.jsonl"),
    "mbpp_plus": dict(path="mbpp_plus.jsonl"),
    "mbpp": dict(path="mbpp.jsonl"),  # MBPP as distributed (tests/test_code_benchmarks.py)
}


def settings(name, **overrides):
  s = BENCHMARKS[name].default_settings()
  s.update({k: os.path.join(FIXTURES, v) for k, v in FILES[name].items()})
  s.update(overrides)
  return s


def load(name, **overrides):
  s = settings(name, **overrides)
  BENCHMARKS[name].validate(s, f"benchmarks.{name}")
  return BENCHMARKS[name].load(s), s


def read(name):
  with open(os.path.join(FIXTURES, name)) as f:
    return [json.loads(line) for line in f]


def test_registry_and_fixtures_load():
  # the generated skills' benchmarks (arith, funcs, strings, cross): tests/test_llm_data.py
  # HumanEval as distributed: the real file, tests/test_humaneval.py
  assert set(BENCHMARKS) == set(FILES) | {"arith", "funcs", "strings", "cross", "humaneval"}
  for name in FILES:
    bench = BENCHMARKS[name]
    problems, _ = load(name)
    assert bench.name == name and bench.headline and len(problems) >= 3
    json.dumps([p.target for p in problems])  # targets are JSON-serialisable
    assert len({p.id for p in problems}) == len(problems)


def test_gsm8k_prompt_is_lm_eval_8_shot():
  problems, _ = load("gsm8k")
  train, test = read("gsm8k_train.jsonl"), read("gsm8k_test.jsonl")
  shots = "".join(f"Question: {r['question']}\nAnswer: {r['answer']}\n\n" for r in train[:8])
  assert problems[0].prompt == shots + f"Question: {test[0]['question']}\nAnswer:"
  assert train[8]["question"] not in problems[0].prompt  # the first 8 only
  assert problems[0].target == {"gold": "21"} and problems[2].target == {"gold": "1234"}
  zero, _ = load("gsm8k", num_fewshot=0, fewshot_path="")
  assert zero[1].prompt == f"Question: {test[1]['question']}\nAnswer:"


@pytest.mark.parametrize("completion, gold, flexible, correct", [
    (" 4 * 6 = 24 eggs, and 24 - 3 = 21.\n#### 21", "21", "21", True),
    (" She has 20 whole eggs.", "21", "20", False),
    (" He earns $1,234.", "1234", "$1,234.", True),
    (" It is -7 degrees.", "-7", "-7", True),
    (" I cannot tell.", "21", None, False),
    (" The answer is 5", "5", "5", True),  # one digit: the second alternative of the regex
])
def test_gsm8k_flexible_extract(completion, gold, flexible, correct):
  [score] = gsm8k.score([Problem("0", "", {"gold": gold})], [completion], None)
  assert (score["extracted"], score["correct"]) == (flexible, correct)


def test_gsm8k_stop_string_cuts_the_next_question():
  raw = " 60 * 3 = 180 km.\n#### 180\n\nQuestion: A cat has 4 legs. How many do 3 cats have?"
  problem = Problem("1", "", {"gold": "180"})
  assert not gsm8k.score([problem], [raw], None)[0]["correct"]  # last number: 3
  cut = truncate(raw, BENCHMARKS["gsm8k"].stop_strings)
  assert cut == " 60 * 3 = 180 km.\n#### 180\n\n"
  assert gsm8k.score([problem], [cut], None)[0]["correct"]


def test_gsm8k_strict_and_flexible_differ():
  problem = Problem("0", "", {"gold": "21"})
  no_hashes, later_number = gsm8k.score(
      [problem] * 2, [" So 21 eggs are whole.", " #### 21\nCheck: 21 + 3 = 24"], None)
  assert no_hashes["correct"] and not no_hashes["correct_strict"]
  assert no_hashes["extracted_strict"] is None
  assert later_number["correct_strict"] and not later_number["correct"]
  assert later_number["extracted"] == "24"


def test_the_extract_setting_picks_the_rule_and_arith_is_strict():
  """extract=strict: "correct" is strict-match (a completion without "#### n" is wrong, a bare
  guessed number too); both rules' fields stay. GSM8K's default is flexible (the paper's
  headline), the study's arith strict; a strings benchmark has no such setting."""
  problem = Problem("0", "", {"gold": "21"})
  completions = [" So 21 eggs are whole.", " #### 21\nCheck: 21 + 3 = 24", " 21", " #### 21"]
  flexible = gsm8k.score([problem] * 4, completions, settings("gsm8k"))
  strict = gsm8k.score([problem] * 4, completions, settings("gsm8k", extract="strict"))
  assert [r["correct"] for r in flexible] == [True, False, True, True]
  assert [r["correct"] for r in strict] == [False, True, False, True]
  assert [r["extracted"] for r in strict] == [None, "21", None, "21"]
  for a, b in zip(flexible, strict, strict=True):  # the same fields, the rule's in front
    assert {k: v for k, v in a.items() if k not in ("correct", "extracted")} == {
        k: v for k, v in b.items() if k not in ("correct", "extracted")}
    assert (a["correct_flexible"], a["correct_strict"]) == (a["correct"], b["correct"])
  assert BENCHMARKS["gsm8k"].default_settings().extract == "flexible"
  assert BENCHMARKS["arith"].default_settings().extract == "strict"
  assert BENCHMARKS["arith"].score is gsm8k.score
  assert "extract" not in BENCHMARKS["strings"].default_settings()
  with pytest.raises(ConfigError, match="benchmarks.gsm8k.extract"):
    BENCHMARKS["gsm8k"].validate(settings("gsm8k", extract="last"), "benchmarks.gsm8k")


def test_math_prompt_is_the_authors_2_shot():
  problems, _ = load("math")
  expected = (
      r"""Solve the following math problem step by step. Put your final answer in \boxed{}.
Problem: What is $2^{10}$?
Solution: $2^{10} = 1024$. The answer is $\boxed{1024}$.
Problem: Simplify $\frac{x^2 - 1}{x - 1}$.
Solution: $\frac{x^2-1}{x-1} = \frac{(x+1)(x-1)}{x-1} = x+1$. The answer is $\boxed{x+1}$.
Problem: """ + read("math_test.jsonl")[1]["problem"] + "\nSolution:")
  assert problems[1].prompt == expected
  assert [p.target["gold"] for p in problems] == ["11", r"\frac{1}{2}", "3", "x^2 + 2x + 1"]


@pytest.mark.parametrize("index, completion, extracted, correct, authors", [
    (1, r" Heads is 1 of 2 outcomes: $\boxed{\frac{1}{2}}$.", r"\frac{1}{2}", True, True),
    (1, r" The probability is $\boxed{0.5}$.", "0.5", True, False),  # math-verify only
    (3, r" $\boxed{x^{2}+2x+1}$", "x^{2}+2x+1", True, False),  # nested braces
    (0, r" $\boxed{ 11 }$ and later $\boxed{12}$", " 11 ", True, True),  # the first box
    (0, " The answer is 11.", None, False, False),  # no box
    (0, r" $\boxed{12}$", "12", False, False),
    (1, r" $\boxed{\frac{1}{2", None, False, False),  # cut before the braces close
])
def test_math_scoring(index, completion, extracted, correct, authors):
  problems, s = load("math")
  [score] = BENCHMARKS["math"].score([problems[index]], [completion], s)
  assert score["extracted"] == extracted
  assert (score["correct"], score["correct_authors"]) == (correct, authors)


def test_math_boxed_reads_balanced_braces():
  solution = r"First $\boxed{2}$, then $\fbox{\frac{\sqrt{3}}{2}}$."
  assert hendrycks_math.boxed(solution) == "2"
  assert hendrycks_math.boxed(solution, last=True) == r"\frac{\sqrt{3}}{2}"
  assert hendrycks_math.boxed(r"so $\boxed 7$.") == "7"


def score_code(name, index, completion, **overrides):
  problems, s = load(name, **overrides)
  return BENCHMARKS[name].score([problems[index]], [completion], s)[0]


def test_code_correct_passes_base_and_plus():
  score = score_code("humaneval_plus", 0, "    return a + b\n")
  assert score["status"] == "pass" and score["base"] and score["plus"] and score["correct"]


def test_code_failing_only_plus_inputs():
  score = score_code("humaneval_plus", 0, "    return a + b if abs(a) < 1000 else 0\n")
  assert score["base"] and not score["plus"] and not score["correct"]
  assert score["status"] == "fail" and score["message"].startswith("plus input 0")


def test_code_syntax_error():
  # MBPP+: the unparseable def is dropped, so the entry point is missing.
  score = score_code("mbpp_plus", 0, "def count_vowels(text)\n    return 3\n")
  assert score["status"] == "error" and "count_vowels" in score["message"]
  # HumanEval+: the bad body line is dropped; the docstring-only function returns None.
  score = score_code("humaneval_plus", 0, "    return a +* b\n")
  assert score["status"] == "fail" and not score["base"]


def test_code_exception_is_an_error():
  score = score_code("humaneval_plus", 0, "    return a // 0\n")
  assert score["status"] == "error" and "ZeroDivisionError" in score["message"]
  assert score["failure"] == "exception"
  assert score_code("humaneval_plus", 0, "    return a - b\n")["failure"] == "wrong_output"


def test_code_infinite_loop_times_out():
  start = time.monotonic()
  score = score_code("humaneval_plus", 0, "    while True:\n        pass\n", timeout_s=1.0)
  assert score["status"] == "timeout" and not score["base"] and score["failure"] == "timeout"
  assert time.monotonic() - start < 3.0


def test_code_sanitising_rescues_trailing_junk():
  completion = ("    return sum(values) / len(values)\n\n\nprint(mean_of([1.0, 2.0]))\n"
                "assert mean_of([1.0]) == 5.0\ncheck = mean_of([])\n"
                "if __name__ == '__main__':\n    main()\nThis function divides the sum by")
  score = score_code("humaneval_plus", 1, completion)
  assert score["status"] == "pass", score["message"]
  for junk in ("print(", "assert mean_of", "check =", "__main__", "This function"):
    assert junk not in score["extracted"]
  program = evalplus.sanitize("import math\nX = 2\ndef f(a):\n    return g(a) * X\n"
                              "def g(a):\n    return math.sqrt(a)\ndef unused():\n    return 0\n"
                              "def f(a):\n    return 0\nf(1)\nfor i in range(3:", "f")
  assert program == ("import math\nX = 2\ndef f(a):\n    return g(a) * X\n"
                     "def g(a):\n    return math.sqrt(a)")
  fenced = "```python\ndef f(a):\n    return a\n```\nThe function f returns a."
  assert evalplus.sanitize(fenced, "f") == "def f(a):\n    return a"


def test_code_float_tolerance_and_sequences():
  close = score_code("humaneval_plus", 1, "    return sum(values) / len(values) + 1e-9\n")
  far = score_code("humaneval_plus", 1, "    return sum(values) / len(values) + 1e-3\n")
  assert close["correct"] and not far["correct"]
  assert score_code("humaneval_plus", 2, "    return tuple(range(0, n + 1, 2))\n")["correct"]
  assert score_code("mbpp_plus", 2, "def common_items(a, b):\n    return {y for y in b if y in a}\n"
                    )["correct"]  # sets compare regardless of order
  assert evalplus.matches([0.1 + 0.2, 1.0], [0.3, 1.0], 0, [])
  assert not evalplus.matches(3, 4, 0, [])


def test_code_evalplus_special_cases():
  # Mbpp/2 is one of the MBPP+ tasks whose JSON lists evalplus turns back into tuples.
  problems, _ = load("mbpp_plus")
  assert problems[2].target["convert"] == "args" and problems[0].target["convert"] is None
  assert score_code("mbpp_plus", 2, "def common_items(a, b):\n    assert type(a) is tuple\n"
                    "    return set(a) & set(b)\n")["correct"]
  # Oracles: order-free lists, "not None" for unserialisable matches, any root of a polynomial.
  assert evalplus.matches([2, 1], [1, 2], 0, [], "set_eq")
  assert not evalplus.matches([2, 1], [1, 3], 0, [], "set_eq")
  assert evalplus.matches({"__repr__": "<re.Match ...>"}, True, 0, [], "not_none")
  assert not evalplus.matches(None, True, 0, [], "not_none")
  assert evalplus.matches(-2.0, 2.0, 1e-6, [[-4, 0, 1]], "poly_root")  # x^2 - 4 at -2
  assert not evalplus.matches(1.0, 2.0, 1e-6, [[-4, 0, 1]], "poly_root")
  assert not evalplus.matches("x", 2.0, 1e-6, [[-4, 0, 1]], "poly_root")


def test_code_reference_outputs_are_held_in_memory(monkeypatch):
  problems, s = load("mbpp_plus")
  completions = ["def count_vowels(t):\n    return 0\n"] * 3
  evalplus._EXPECTED.clear()
  calls = []
  run_many = sandbox.run_many
  monkeypatch.setattr(sandbox, "run_many", lambda jobs, *a: calls.append(len(jobs))
                      or run_many(jobs, *a))
  first = BENCHMARKS["mbpp_plus"].score(problems, completions, s)
  second = BENCHMARKS["mbpp_plus"].score(problems, completions, s)
  assert calls == [3, 3, 0, 3]  # references once, then only the three candidates
  assert first == second  # the second call ran no reference: they were held in memory


def test_limit_and_reference_programs():
  problems, _ = load("humaneval_plus", limit=2)
  assert [p.id for p in problems] == ["HumanEval/0", "HumanEval/1"]
  assert problems[0].target["reference"].startswith("def add_ints(")  # prompt + body
  mbpp, _ = load("mbpp_plus")
  assert "def count_vowels(text):" in mbpp[0].target["reference"]


def test_truncate():
  assert truncate("abc\nProblem: x\nQuestion: y", ("Question:", "\nProblem:")) == "abc"
  assert truncate("no stop here", ("Question:",)) == "no stop here"
  assert truncate("a</s>b", ("", "</s>")) == "a"


def test_data_errors_name_the_file(tmp_path):
  bad = tmp_path / "gsm8k_test.jsonl"
  bad.write_text('{"question": "q", "answer": "#### 1"}\n{"question": "q2"}\n')
  with pytest.raises(DataError, match=r"gsm8k_test.jsonl:2: missing field 'answer'"):
    load("gsm8k", path=str(bad))
  missing = str(tmp_path / "nowhere.jsonl")
  with pytest.raises(DataError, match="nowhere.jsonl"):
    load("math", path=missing)
  with pytest.raises(DataError, match="nowhere.jsonl"):
    BENCHMARKS["math"].load(settings("math", path=missing))


@pytest.mark.parametrize("name, overrides, field", [
    ("gsm8k", dict(limit=-1), "benchmarks.gsm8k.limit"),
    ("gsm8k", dict(path=""), "benchmarks.gsm8k.path"),
    ("math", dict(colour="red"), "benchmarks.math.colour"),
    ("humaneval_plus", dict(workers=0), "benchmarks.humaneval_plus.workers"),
    ("mbpp_plus", dict(timeout_s=-1.0), "benchmarks.mbpp_plus.timeout_s"),
    ("mbpp_plus", dict(output_mb=0), "benchmarks.mbpp_plus.output_mb"),
])
def test_bad_settings_raise_config_error(name, overrides, field):
  s = settings(name)
  for key, value in overrides.items():
    s[key] = value
  with pytest.raises(ConfigError) as error:
    BENCHMARKS[name].validate(s, f"benchmarks.{name}")
  assert error.value.field == field
