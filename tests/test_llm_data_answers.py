"""The generated skills' reference answers against independent readings of their questions: the
worked arithmetic recomputed with Python ints, every code docstring and string question read by
its own oracle here, and the code references scored in the sandbox through evalplus.py."""

import random
import re

import pytest

from compgen_jax.llm_data import build, code_skill, cross_skill, math_skill, strings_skill
from compgen_jax.llm_eval import exact_match, gsm8k, sandbox
from compgen_jax.llm_eval.base import Problem
from compgen_jax.llm_eval.benchmarks import BENCHMARKS
from compgen_jax.types import DataError

STEP = re.compile(r"(\d+) ([-+*/]) (\d+) = (\d+)")
PER_TEMPLATE = 25


def check_worked_answer(question: str, answer: str, max_operand: int) -> tuple[int, list[str]]:
  """(the answer, its operators) after recomputing every step "x op y = z" with Python ints:
  operands are the question's numbers or earlier results (or 2, for "doubles"), every number
  of the question is used, "/" divides exactly, and "#### n" is the last result."""
  given = [int(n) for n in re.findall(r"\d+", question)]
  assert given and all(2 <= n <= max_operand for n in given), question
  *steps, last = answer.split("\n")
  known, used, ops = set(given) | ({2} if "doubles" in question else set()), set(), []
  for line in steps:
    [(x, op, y, z)] = STEP.findall(line)
    x, y, z = int(x), int(y), int(z)
    assert {x, y} <= known, line
    if op == "/":
      assert y and x % y == 0, line
    assert z == {"+": x + y, "-": x - y, "*": x * y, "/": x // y}[op] >= 0, line
    known.add(z)
    used |= {x, y}
    ops.append(op)
  assert set(given) <= used and 1 <= len(steps) <= 3, (question, answer)
  assert last == f"#### {z}"
  return z, ops


def test_math_answers_recompute_and_extract(tiny_llm_data):
  cfg, directory = tiny_llm_data
  stored = [r for s in ("train", "test") for r in build.read_jsonl(
      f"{directory}/{build.split_file('arith', s)}")]
  rand = random.Random(0)
  fresh = [math_skill.make(t, rand, cfg.arith.max_operand)
           for t in math_skill.BY_NAME.values() for _ in range(PER_TEMPLATE)]
  ops, lengths = set(), set()
  for record in stored + fresh:
    value, used = check_worked_answer(record["question"], record["answer"],
                                      cfg.arith.max_operand)
    ops |= set(used)
    lengths.add(len(used))
    gold = Problem("0", "", {"gold": gsm8k.normalize(record["answer"])})
    [score] = gsm8k.score([gold], [" " + record["answer"]], None)
    assert score["correct"] and score["correct_strict"] and score["extracted"] == str(value)
  assert ops == {"+", "-", "*", "/"} and lengths == {1, 2, 3}


def _ints(doc):
  return [int(n) for n in re.findall(r"-?\d+", doc)]


def _quoted(doc):
  return re.findall(r"'([^']*)'", doc)


# Each task read from its docstring's first line alone (k: its number, q: its quoted text).
FUNCS = {
    "filter_greater": lambda d, a: [x for x in a if x > _ints(d)[0]],
    "filter_less": lambda d, a: [x for x in a if x < _ints(d)[0]],
    "filter_even": lambda d, a: [x for x in a if x % 2 == 0],
    "filter_divisible": lambda d, a: [x for x in a if x % _ints(d)[0] == 0],
    "map_add": lambda d, a: [x + _ints(d)[0] for x in a],
    "map_mul": lambda d, a: [x * _ints(d)[0] for x in a],
    "square_all": lambda d, a: [x ** 2 for x in a],
    "reverse_list": lambda d, a: list(reversed(a)),
    "clamp": lambda d, a: [x if x <= _ints(d)[0] else _ints(d)[0] for x in a],
    "count_equal": lambda d, a: a.count(_ints(d)[0]),
    "count_greater": lambda d, a: len([x for x in a if x > _ints(d)[0]]),
    "sum_list": lambda d, a: sum(a),
    "sum_greater": lambda d, a: sum(x for x in a if x > _ints(d)[0]),
    "max_list": lambda d, a: sorted(a)[-1],
    "min_list": lambda d, a: sorted(a)[0],
    "index_of": lambda d, a: next((i for i, x in enumerate(a) if x == _ints(d)[0]), -1),
    "reverse_string": lambda d, a: "".join(reversed(a)),
    "repeat_string": lambda d, a: "".join([a] * _ints(d)[0]),
    "replace_char": lambda d, a: "".join("*" if ch == _quoted(d)[0] else ch for ch in a),
    "remove_char": lambda d, a: "".join(ch for ch in a if ch != _quoted(d)[0]),
    "join_words": lambda d, a: _quoted(d)[0].join(w for w in a.split(" ") if w),
    "first_letters": lambda d, a: "".join(w[:1] for w in a.split(" ") if w),
    "upper_words": lambda d, a: "".join(ch.upper() for ch in a),
    "count_char": lambda d, a: sum(ch == _quoted(d)[0] for ch in a),
    "count_words": lambda d, a: len([w for w in a.split(" ") if w]),
    "multiples": lambda d, a: list(range(_ints(d)[0], _ints(d)[0] * a + 1, _ints(d)[0])),
    "countdown": lambda d, a: _quoted(d)[0].join(map(str, range(a, 0, -1))),
    "count_less": lambda d, a: len([x for x in a if x < _ints(d)[0]]),
    "sum_even": lambda d, a: sum(filter(lambda x: not x % 2, a)),
    "spread": lambda d, a: sorted(a)[-1] - sorted(a)[0],
    "remove_spaces": lambda d, a: "".join(a.split(" ")),
    "count_spaces": lambda d, a: len(a) - len(a.replace(" ", "")),
    "keep_smaller": lambda d, a: [x for x in a if x < _ints(d)[0]],
    "total_above": lambda d, a: sum(x for x in a if x > _ints(d)[0]),
    "lowest": lambda d, a: sorted(a)[0],
    "delete_char": lambda d, a: "".join(ch for ch in a if ch != _quoted(d)[0]),
    "char_count": lambda d, a: sum(ch == _quoted(d)[0] for ch in a),
    "above_count": lambda d, a: len([x for x in a if x > _ints(d)[0]]),
    "star_char": lambda d, a: "".join("*" if ch == _quoted(d)[0] else ch for ch in a),
    "highest": lambda d, a: sorted(a)[-1],
}


def test_code_references_match_their_docstrings():
  assert set(FUNCS) == set(code_skill.BY_NAME)
  rand = random.Random(1)
  for template in code_skill.TEMPLATES:
    for _ in range(PER_TEMPLATE):
      r = code_skill.make(template, rand, 3, 6)
      doc = r["prompt"].split('"""')[1].split("\n")[0]
      program = r["prompt"] + r["canonical_solution"]
      for args in r["base_input"] + r["plus_input"]:
        assert code_skill.call(program, r["entry_point"], args) == FUNCS[template.name](
            doc, *args), (program, args)
      shown = r["prompt"].split(">>> ")[1].split("\n")[1].strip()
      assert shown == repr(FUNCS[template.name](doc, *r["base_input"][0]))


def test_cross_references_solve_the_word_problem():
  rand = random.Random(2)
  for template in math_skill.BY_NAME.values():
    r = cross_skill.make(template, rand, 100, 3, 6)
    args = math_skill.slots(template)
    for row in r["base_input"] + r["plus_input"]:
      words = math_skill.render(template, dict(zip(args, row, strict=True)), "Ava", "eggs")
      expected, _ = check_worked_answer(words["question"], words["answer"], 100)
      assert code_skill.call(r["prompt"] + r["canonical_solution"], r["entry_point"],
                             row) == expected


STRINGS = {
    "reverse_word": lambda w: w[0][::-1],
    "upper_word": lambda w: w[0].upper(),
    "first_letter": lambda w: w[0][:1],
    "last_letter": lambda w: w[0][-1:],
    "initials": lambda w: "".join(x[0] for x in w[0].split(" ")),
    "sort_letters": lambda w: "".join(sorted(w[0])),
    "no_vowels": lambda w: re.sub("[aeiou]", "", w[0]),
    "replace_letter": lambda w: re.sub(w[0], w[2], w[1]),
    "swap_words": lambda w: " ".join([w[0].split(" ")[-1], *w[0].split(" ")[1:-1],
                                      w[0].split(" ")[0]]),
    "capitalize": lambda w: " ".join(x[0].upper() + x[1:] for x in w[0].split(" ")),
    "repeat_word": lambda w, k: " ".join([w[0]] * k),
    "dashes": lambda w: w[0].replace(" ", "-"),
    "double_letters": lambda w: re.sub("(.)", r"\1\1", w[0]),
    "length": lambda w: str(len(w[0])),
    "count_letter": lambda w: str(w[1].count(w[0])),
    "last_word": lambda w: w[0].split(" ")[-1],
    "capitalize_word": lambda w: w[0][:1].upper() + w[0][1:],
    "spell_out": lambda w: " ".join(list(w[0])),
    "final_letter": lambda w: w[0][-1:],
    "title_case": lambda w: " ".join(x[0].upper() + x[1:] for x in w[0].split(" ")),
    "twice_letters": lambda w: re.sub("(.)", r"\1\1", w[0]),
    "final_word": lambda w: w[0].split(" ")[-1],
    "swap_ends": lambda w: " ".join([w[0].split(" ")[-1], *w[0].split(" ")[1:-1],
                                     w[0].split(" ")[0]]),
    "word_times": lambda w, k: " ".join([w[0]] * k),
    "first_word": lambda w: w[0].split(" ")[0],
    "opening_word": lambda w: w[0].split(" ")[0],
}


def test_string_answers_and_scorer():
  assert set(STRINGS) == set(strings_skill.BY_NAME)
  rand = random.Random(3)
  for template in strings_skill.TEMPLATES:
    for _ in range(PER_TEMPLATE):
      r = strings_skill.make(template, rand)
      quoted = re.findall(r'"([^"]*)"', r["question"])
      times = re.findall(r"(\d+) times", r["question"])
      oracle = STRINGS[template.name]
      assert r["answer"] == (oracle(quoted, int(times[0])) if times else oracle(quoted))
  problem = Problem("0", "", {"gold": "elppa"})
  right, spaced, wrong, case = exact_match.score(
      [problem] * 4, [" elppa", "  elppa \n", " elpa", " Elppa"], None)
  assert right["correct"] and spaced["correct"] and right["extracted"] == "elppa"
  assert not wrong["correct"] and not case["correct"]


def test_strings_answers_must_be_one_bare_line(tmp_path):
  path = tmp_path / "s.jsonl"
  path.write_text('{"question": "q", "answer": " padded"}\n')
  settings = BENCHMARKS["strings"].default_settings()
  settings.update(path=str(path), num_fewshot=0)
  with pytest.raises(DataError, match="one non-empty line"):
    BENCHMARKS["strings"].load(settings)


def _wrong(solution: str, returns: str) -> str:
  """The reference with its result changed: an int + 1, a list + [0], a string + '!'."""
  change = {"int": "{} + 1", "list[int]": "{} + [0]", "str": "{} + '!'"}[returns]
  head, result = solution.rsplit("return ", 1)
  return head + "return " + change.format(f"({result.strip()})") + "\n"


@pytest.mark.parametrize("name", ["funcs", "cross"])
def test_references_pass_in_the_sandbox_and_wrong_bodies_fail(tiny_llm_data, name):
  _, directory = tiny_llm_data
  settings = BENCHMARKS[name].default_settings()
  settings.update(build.benchmark_settings(directory)[name], timeout_s=5.0, memory_mb=512,
                  allow_unisolated=sandbox.isolation_problem() is not None)
  problems = BENCHMARKS[name].load(settings)[:4]
  records = {r["task_id"]: r for r in build.read_jsonl(settings.path)}
  right = [records[p.id]["canonical_solution"] for p in problems]
  wrong = [_wrong(s, records[p.id]["prompt"].split("-> ")[1].split(":\n")[0])
           for s, p in zip(right, problems, strict=True)]
  rows = BENCHMARKS[name].score(problems * 2, right + wrong, settings)
  assert [r["correct"] for r in rows] == [True] * len(problems) + [False] * len(problems)
  assert [r["status"] for r in rows] == ["pass"] * len(problems) + ["fail"] * len(problems)
