"""HumanEval and MBPP as their authors distribute them, scored by their own test code.

A completion passes when the benchmark's tests, run after it in one sandbox job, finish:
HumanEval's `check(entry_point)` returns, MBPP's `test_list` asserts all hold. The job's program
is the sanitised candidate (evalplus.sanitize: imports and what the entry point and the tests
reach), the test code, then a function the harness calls once the program has run: it returns a
nonce that is the job's input. A pass is that nonce coming back; a program that exits before the
tests finish, prints a success line or writes result lines of its own cannot produce it (the
nonce is not in its text; only reading the harness's memory would find it).
"""

import ast
import math
import secrets

import ml_collections

from compgen_jax import checks
from compgen_jax.llm_eval import base, evalplus, sandbox
from compgen_jax.llm_eval.base import Benchmark, Problem
from compgen_jax.types import DataError

HUMANEVAL_FIELDS = {"task_id": str, "prompt": str, "canonical_solution": str, "test": str,
                    "entry_point": str}
MBPP_FIELDS = {"task_id": int, "text": str, "code": str, "test_list": list,
               "test_setup_code": str}
PASSED = "__compgen_passed__"  # the function returning the nonce, defined after the tests
# MBPP's task ids by split (the dataset's README): 1-10 held out for prompting, 11-510 test.
MBPP_SPLITS = {"prompt": (1, 10), "test": (11, 510), "validation": (511, 600),
               "train": (601, 974), "all": (1, math.inf)}
# The MBPP paper's prompt (Austin et al. 2021): the task's text, then its tests; a shot
# continues with its code and "[DONE]", which is also where generation stops.
MBPP_PROMPT = ("You are an expert Python programmer, and here is your task: {text} Your code "
               "should pass these tests:\n\n{tests}\n[BEGIN]\n")
MBPP_STOP_STRINGS = ("[DONE]", *evalplus.STOP_STRINGS)


def humaneval_settings() -> ml_collections.ConfigDict:
  return evalplus.default_settings()  # path, limit and the sandbox's settings


def mbpp_settings() -> ml_collections.ConfigDict:
  # split: which task ids are scored (MBPP_SPLITS); fewshot_ids: the tasks whose text, tests and
  # code precede the question, in order (() = zero-shot)
  settings = evalplus.default_settings()
  settings.update(split="test", fewshot_ids=(2, 3, 4))
  return settings


def _names(code: str, where: str) -> list[str]:
  """The names `code` uses, sorted; DataError if it does not parse."""
  try:
    tree = ast.parse(code)
  except (SyntaxError, ValueError) as e:
    raise DataError(f"{where}: test code does not parse ({e})") from None
  return sorted({node.id for node in ast.walk(tree) if isinstance(node, ast.Name)})


def _parses(code: str) -> bool:
  try:
    ast.parse(code)
  except (SyntaxError, ValueError):
    return False
  return True


def load_humaneval(settings: ml_collections.ConfigDict) -> list[Problem]:
  """OpenAI's HumanEval file (plain or .jsonl.gz): the model continues `prompt`; the tests are
  `test` and `check(entry_point)`."""
  problems = []
  for index, r in base.read_jsonl(settings.path, HUMANEVAL_FIELDS):
    where = f"{settings.path}:{index + 1}"
    tests = f"{r['test']}\n\ncheck({r['entry_point']})\n"
    if not _parses(r["prompt"] + r["canonical_solution"]):
      raise DataError(f"{where}: prompt + canonical_solution does not parse")
    roots = [r["entry_point"], *_names(tests, where)]  # HumanEval/50's tests call encode_shift
    problems.append(Problem(r["task_id"], r["prompt"], dict(
        prefix=r["prompt"], setup="", tests=tests, roots=roots)))
  return base.limited(problems, settings)


def _mbpp_example(r: dict) -> str:
  return MBPP_PROMPT.format(text=r["text"].strip(), tests="\n".join(r["test_list"]))


def load_mbpp(settings: ml_collections.ConfigDict) -> list[Problem]:
  """MBPP's mbpp.jsonl (plain or .gz): the tasks of settings.split, each prompted as the paper
  does after the settings.fewshot_ids tasks; the tests are `test_setup_code` and `test_list`."""
  records = {}
  for index, r in base.read_jsonl(settings.path, MBPP_FIELDS):
    where = f"{settings.path}:{index + 1}"
    if not all(isinstance(t, str) for t in r["test_list"]) or not r["test_list"]:
      raise DataError(f"{where}: field 'test_list' must be a non-empty list of strings")
    records[r["task_id"]] = (where, r)
  missing = [i for i in settings.fewshot_ids if i not in records]
  if missing:
    raise DataError(f"{settings.path}: no task {missing[0]} for the prompt's examples "
                    f"(fewshot_ids={tuple(settings.fewshot_ids)})")
  shots = "".join(_mbpp_example(records[i][1]) + records[i][1]["code"].replace("\r\n", "\n")
                  + "\n[DONE]\n" for i in settings.fewshot_ids)
  low, high = MBPP_SPLITS[settings.split]
  problems = []
  for task_id, (where, r) in records.items():
    if low <= task_id <= high:
      tests = "\n".join(r["test_list"]) + "\n"
      roots = _names(r["test_setup_code"] + "\n" + tests, where)
      if not roots:
        raise DataError(f"{where}: the tests use no name (no function to test)")
      problems.append(Problem(str(task_id), shots + _mbpp_example(r), dict(
          prefix="", setup=r["test_setup_code"], tests=tests, roots=roots)))
  if not problems:
    raise DataError(f"{settings.path}: no task of split {settings.split!r} (ids {low} to {high})")
  return base.limited(problems, settings)


def candidate(target: dict, completion: str) -> str:
  """The completion as run: sanitised (evalplus.sanitize), keeping what the tests reach."""
  roots = target["roots"]
  return evalplus.sanitize(target["prefix"] + completion, roots[0], tuple(roots[1:]))


def program(target: dict, code: str) -> str:
  """The job's program: setup, the candidate's code, the tests, and the function returning the
  nonce (defined, and so callable, only if the tests ran to their end)."""
  return "\n\n".join([target["setup"], code, target["tests"],
                      f"def {PASSED}(nonce):\n  return nonce\n"])


def verdict(result: sandbox.Result, nonce: str, raw: str) -> tuple[bool, str | None]:
  """(passed, failure kind: None or one of sandbox.FAILURES); "syntax" whenever the text as
  written (prompt + completion) does not parse, whatever the sanitised program then did."""
  if result.status == "ok" and result.outputs == [nonce]:
    return True, None
  if not _parses(raw):
    return False, "syntax"
  return False, sandbox.failure_kind(result) or "exit"  # "ok" without the nonce: forged lines


def make(name: str, load, default_settings, stop_strings) -> Benchmark:
  """A benchmark scored by running its own tests after each completion in the sandbox."""

  def validate(settings: ml_collections.ConfigDict, prefix: str) -> None:
    base.check_known(settings, prefix, default_settings())
    evalplus.check_execution(settings, prefix)
    if "split" in settings:
      checks.choice(f"{prefix}.split", settings.split, MBPP_SPLITS)
      if settings.fewshot_ids:
        checks.integers(f"{prefix}.fewshot_ids", settings.fewshot_ids, low=1)
    base.check_file(settings, prefix, "path")

  def score(problems: list[Problem], completions: list[str],
            settings: ml_collections.ConfigDict) -> list[dict]:
    """Per problem: "correct", "failure" (None or a sandbox.FAILURES kind), "message",
    "extracted" (the candidate as run), "isolated" and "sandbox" (as evalplus's rows)."""
    safe = evalplus.isolated(settings, f"benchmarks.{name}")
    mechanism = sandbox.mechanism() if safe else "none"
    nonces = [secrets.token_hex(16) for _ in problems]
    candidates = [candidate(p.target, c) for p, c in zip(problems, completions, strict=True)]
    jobs = [sandbox.Job(program(p.target, text), PASSED, [[nonce]])
            for p, text, nonce in zip(problems, candidates, nonces, strict=True)]
    results = sandbox.run_many(jobs, float(settings.timeout_s), settings.memory_mb,
                               settings.workers, settings.output_mb, safe)
    rows = []
    for p, c, text, result, nonce in zip(problems, completions, candidates, results, nonces,
                                         strict=True):
      passed, failure = verdict(result, nonce, p.target["prefix"] + c)
      message = None if passed else result.message or "result lines without the nonce"
      rows.append(dict(correct=passed, failure=failure, message=message, extracted=text,
                       isolated=safe, sandbox=mechanism))
    return rows

  return Benchmark(name, default_settings, validate, load, stop_strings, score,
                   headline="pass@1")


HUMANEVAL = make("humaneval", load_humaneval, humaneval_settings, evalplus.STOP_STRINGS)
MBPP = make("mbpp", load_mbpp, mbpp_settings, MBPP_STOP_STRINGS)
