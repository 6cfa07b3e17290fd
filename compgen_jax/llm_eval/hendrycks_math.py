"""MATH (Hendrycks et al.) with the paper authors' 2-shot prompt.

The answer is the first \\boxed{...} of the completion, read with balanced braces; the gold is the
last \\boxed{...} of the reference solution. "correct" is math-verify's equivalence;
"correct_authors" the authors' string comparison, kept so the two scorings can be compared.
"""

import threading

import ml_collections

from compgen_jax import checks
from compgen_jax.llm_eval import base
from compgen_jax.llm_eval.base import Benchmark, Problem
from compgen_jax.types import DataError

PREFIX = (
    "Solve the following math problem step by step. Put your final answer in \\boxed{}.\n"
    "Problem: What is $2^{10}$?\n"
    "Solution: $2^{10} = 1024$. The answer is $\\boxed{1024}$.\n"
    "Problem: Simplify $\\frac{x^2 - 1}{x - 1}$.\n"
    "Solution: $\\frac{x^2-1}{x-1} = \\frac{(x+1)(x-1)}{x-1} = x+1$. "
    "The answer is $\\boxed{x+1}$.\n")
STOP_STRINGS = ("\nProblem:",)
_FIELDS = {"problem": str, "solution": str}
_BOXES = ("\\boxed", "\\fbox")


def default_settings() -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict(dict(path="", limit=0))


def validate(settings: ml_collections.ConfigDict, prefix: str) -> None:
  base.check_known(settings, prefix, default_settings())
  checks.integer(f"{prefix}.limit", settings.limit, low=0)
  base.check_file(settings, prefix, "path")


def prompt(problem: str) -> str:
  return PREFIX + f"Problem: {problem}\nSolution:"


def _box_content(text: str, start: int) -> str | None:
  """The argument of the box command ending at `start`: "{...}" with balanced braces, or the
  bare token of "\\boxed 5"; None if the braces never close (a cut-off completion)."""
  rest = text[start:].lstrip(" ")
  if not rest.startswith("{"):
    spaced = text[start:start + 1] == " "  # "\boxed 5"; "\boxedx" is another command
    token = rest.split("$")[0].split()
    return token[0] if spaced and token else None
  depth = 0
  for i, char in enumerate(rest):
    depth += {"{": 1, "}": -1}.get(char, 0)
    if depth == 0:
      return rest[1:i]
  return None


def boxed(text: str, last: bool = False) -> str | None:
  """The first (or last) \\boxed{...} / \\fbox{...} content of `text`, braces balanced.

  The authors' regex \\\\boxed\\{([^}]*)\\} stops at the first "}", so \\boxed{\\frac{1}{2}} read
  as "\\frac{1"; counting braces reads "\\frac{1}{2}".
  """
  found = []
  for command in _BOXES:
    at = text.find(command)
    while at >= 0:
      content = _box_content(text, at + len(command))
      if content is not None:
        found.append((at, content))
      at = text.find(command, at + 1)
  if not found:
    return None
  return (max if last else min)(found)[1]


def authors_normalize(answer: str) -> str | float:
  """The authors' comparison key: spaces removed, lowercased, a float when it parses."""
  key = answer.replace(" ", "").lower()
  try:
    return float(key)
  except ValueError:
    return key


def equivalent(gold: str, answer: str) -> bool:
  """math-verify's equivalence of two boxed contents (gold first: verify is not symmetric)."""
  import math_verify  # here: it imports sympy (0.5 s), which every llm binary's start would pay

  # math-verify's timeouts use SIGALRM, which only the main thread may set.
  timeout = 5 if threading.current_thread() is threading.main_thread() else None
  parse = lambda s: math_verify.parse(f"\\boxed{{{s}}}", parsing_timeout=timeout)
  return bool(math_verify.verify(parse(gold), parse(answer), timeout_seconds=timeout))


def load(settings: ml_collections.ConfigDict) -> list[Problem]:
  problems = []
  for index, record in base.read_jsonl(settings.path, _FIELDS):
    gold = boxed(record["solution"], last=True)
    if gold is None:
      raise DataError(f"{settings.path}:{index + 1}: field 'solution' has no \\boxed{{...}}")
    problems.append(Problem(str(index), prompt(record["problem"]), {"gold": gold}))
  return base.limited(problems, settings)


def score(problems: list[Problem], completions: list[str],
          settings: ml_collections.ConfigDict) -> list[dict]:
  """Per problem: "correct" (math-verify), "correct_authors", "extracted", "gold"."""
  del settings  # nothing to tune
  out = []
  for problem, completion in zip(problems, completions, strict=True):
    gold, answer = problem.target["gold"], boxed(completion)
    found = answer is not None
    out.append(dict(
        correct=found and equivalent(gold, answer), extracted=answer,
        correct_authors=found and authors_normalize(answer) == authors_normalize(gold),
        gold=gold))
  return out


BENCHMARK = Benchmark("math", default_settings, validate, load, STOP_STRINGS, score,
                      headline="accuracy (math-verify)")
