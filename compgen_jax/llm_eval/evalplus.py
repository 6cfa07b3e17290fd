"""HumanEval+ and MBPP+ scored the way evalplus does it, with our own sanitiser and sandbox.

The model continues problem["prompt"]; the program is sanitise(prompt + completion): trailing
lines dropped until it parses, then the imports and the definitions the entry point reaches. The
reference program's outputs on base_input and plus_input (computed in their own pass through the
same sandbox, so both sides are encoded alike, and held in this process's memory, never in a file
a candidate could reach) are the expected values. `base` passes if every base input matches,
`plus` (the paper's pass@1) if base and every plus input do. Generated code runs only isolated
(sandbox.py) unless the settings say allow_unisolated=True; every row records which it was.
"""

import ast
import hashlib
import json
import math
import warnings

import ml_collections

from compgen_jax import checks
from compgen_jax.llm_eval import base, sandbox
from compgen_jax.llm_eval import evalplus_special as special
from compgen_jax.llm_eval.base import Benchmark, Problem
from compgen_jax.types import ConfigError, DataError

# Each stop string starts a top-level statement that sanitise() drops (a test call, a print, an
# assert, a __main__ block or a main() nothing reaches), so stopping there never changes the
# score of a program that defines its helpers before testing them (evalplus's own stops, minus
# "\ndef "/"\nclass "/"\nimport ", which could cut helpers defined after the entry point).
STOP_STRINGS = ("\nif __name__", "\ndef main(", "\nprint(", "\nassert ")
FLOAT_ATOL = 1e-6  # evalplus: the tolerance for float outputs when the problem's atol is 0
RTOL = 1e-7  # np.testing.assert_allclose's default, which evalplus uses
_FIELDS = {"task_id": str, "prompt": str, "entry_point": str, "canonical_solution": str,
           "base_input": list, "plus_input": list}
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_EXPECTED = {}  # {hash of a problem's target: the reference's outputs}, for this process only


def default_settings() -> ml_collections.ConfigDict:
  # output_mb: what one job may write back (all its inputs' results); more is an error.
  # allow_unisolated: run generated code without namespaces where they are unavailable, accepting
  # that it can then read the references, touch files and outlive its job.
  return ml_collections.ConfigDict(dict(path="", limit=0, timeout_s=10.0, workers=2,
                                        memory_mb=2048, output_mb=64, allow_unisolated=False))


def validate(settings: ml_collections.ConfigDict, prefix: str) -> None:
  base.check_known(settings, prefix, default_settings())
  check_execution(settings, prefix)
  base.check_file(settings, prefix, "path")


def check_execution(settings: ml_collections.ConfigDict, prefix: str) -> None:
  """The settings every benchmark that runs generated code shares (default_settings' fields)."""
  checks.integer(f"{prefix}.limit", settings.limit, low=0)
  checks.positive(f"{prefix}.timeout_s", settings.timeout_s)
  checks.integer(f"{prefix}.workers", settings.workers, low=1)
  checks.integer(f"{prefix}.memory_mb", settings.memory_mb, low=64)
  checks.integer(f"{prefix}.output_mb", settings.output_mb, low=1)
  isolated(settings, prefix)


def isolated(settings: ml_collections.ConfigDict, prefix: str) -> bool:
  """Whether generated code will run isolated; ConfigError if it cannot and the settings do not
  accept the risk."""
  problem = sandbox.isolation_problem()
  if problem and not settings.allow_unisolated:
    raise ConfigError(f"{prefix}.allow_unisolated", f"generated code cannot be isolated here "
                      f"({problem}); {sandbox.HOW_TO_ISOLATE}, or set {prefix}.allow_unisolated"
                      f"=True to run it unisolated at your own risk")
  return problem is None


def _parse(program: str) -> ast.Module:
  with warnings.catch_warnings():  # e.g. invalid escape sequences in generated strings
    warnings.simplefilter("ignore")
    return ast.parse(program)


def _definition(program: str, name: str) -> ast.AST | None:
  """The top-level definition of `name` in `program`; None if none, or if it does not parse."""
  try:
    body = _parse(program).body
  except (SyntaxError, ValueError):
    return None
  return next((n for n in body if isinstance(n, _DEFINITIONS) and n.name == name), None)


def _defines(program: str, name: str) -> bool:
  return _definition(program, name) is not None


def _has_body(program: str, name: str) -> bool:
  """Whether `program` defines `name` with a statement besides its docstring (a prompt's
  signature and docstring alone, or with a body sanitize dropped, define it with none)."""
  node = _definition(program, name)
  if node is None:
    return False
  statements = node.body
  if (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and statements
      and isinstance(statements[0], ast.Expr) and isinstance(statements[0].value, ast.Constant)
      and isinstance(statements[0].value.value, str)):
    statements = statements[1:]  # the docstring
  return bool(statements)


def load(settings: ml_collections.ConfigDict, dataset: str) -> list[Problem]:
  """Problems whose target holds the entry point, the reference program, the inputs, atol and
  evalplus's special handling of the task (dataset: "humaneval" or "mbpp")."""
  problems = []
  for index, r in base.read_jsonl(settings.path, _FIELDS):
    where = f"{settings.path}:{index + 1}"
    atol = r.get("atol", 0)
    if not isinstance(atol, int | float) or isinstance(atol, bool) or not atol >= 0:
      raise DataError(f"{where}: field 'atol' must be a number >= 0, got {atol!r}")
    # HumanEval's canonical_solution is a body for the prompt's signature, MBPP+'s a program.
    reference = r["prompt"] + r["canonical_solution"]
    if not _defines(reference, r["entry_point"]):
      reference = r["canonical_solution"]
    if not _defines(reference, r["entry_point"]):
      raise DataError(f"{where}: canonical_solution does not define {r['entry_point']!r}")
    problems.append(Problem(r["task_id"], r["prompt"], dict(
        entry_point=r["entry_point"], reference=reference, base_input=r["base_input"],
        plus_input=r["plus_input"], atol=atol,
        convert=special.conversion(dataset, r["task_id"]),
        oracle=special.oracle(dataset, r["entry_point"]))))
  return base.limited(problems, settings)


def sanitize(code: str, entry_point: str, also: tuple[str, ...] = ()) -> str:
  """The imports and the top-level definitions (functions, classes, assignments) that
  entry_point (and the names in `also`) reach, after dropping trailing lines until the code
  parses (a generation cut mid-statement) and markdown fence lines. Top-level calls, prints,
  asserts and `if` blocks go. Like evalplus, the first definition of a name wins; unlike it, a
  function without `return` is kept."""
  # Markdown fences would hide everything after them from the parse; evalplus finds the longest
  # parseable block of lines instead, at O(lines^2) parses.
  lines = [line for line in code.splitlines() if not line.startswith("```")]
  while True:
    try:
      tree = _parse("\n".join(lines))
      break
    except (SyntaxError, ValueError):  # ValueError: a NUL byte
      lines.pop()  # the empty program parses, so this ends
  imports, definitions = [], {}
  for node in tree.body:
    if isinstance(node, ast.Import | ast.ImportFrom):
      imports.append(node)
    elif isinstance(node, _DEFINITIONS):
      definitions.setdefault(node.name, node)
    elif (isinstance(node, ast.Assign) and len(node.targets) == 1
          or isinstance(node, ast.AnnAssign) and node.value is not None):
      target = node.targets[0] if isinstance(node, ast.Assign) else node.target
      if isinstance(target, ast.Name):
        definitions.setdefault(target.id, node)
  reached, todo = set(), [entry_point, *also]
  while todo:
    name = todo.pop()
    if name in definitions and name not in reached:
      reached.add(name)
      todo.extend(n.id for n in ast.walk(definitions[name]) if isinstance(n, ast.Name))
  kept = sorted((definitions[name] for name in reached), key=lambda node: node.lineno)
  return "\n".join("\n".join(lines[_first_line(node) - 1:node.end_lineno])
                   for node in imports + kept)


def _first_line(node: ast.stmt) -> int:
  return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def _is_number(x) -> bool:
  return isinstance(x, int | float) and not isinstance(x, bool)


def _is_floats(x) -> bool:
  return isinstance(x, float) or isinstance(x, list) and all(isinstance(v, float) for v in x)


def _close(out, expected, atol: float) -> bool:
  """np.testing.assert_allclose's test, element-wise through lists (NaN equals NaN there)."""
  if _is_number(out) and _is_number(expected):
    if math.isnan(out) and math.isnan(expected):
      return True
    return abs(out - expected) <= atol + RTOL * abs(expected)
  if isinstance(out, list) and isinstance(expected, list):
    return len(out) == len(expected) and all(map(_close, out, expected, [atol] * len(out)))
  return out == expected


def matches(out, expected, atol: float, args: list, oracle: str | None = None) -> bool:
  """evalplus's check of one output (both sides sandbox_job.encode()d): equality or the task's
  special oracle, else closeness within atol (at least FLOAT_ATOL for float outputs)."""
  try:
    if oracle == "poly_root":
      return special.poly_root(out, args, atol)
    exact = out == expected
    if oracle is not None:
      exact = special.judge(oracle, exact, out, expected, args, atol)
  except (TypeError, ValueError, ArithmeticError, IndexError, KeyError):
    return False  # evalplus: any exception in the check fails the input
  if exact:
    return True
  if atol == 0 and _is_floats(expected):
    atol = FLOAT_ATOL
  return atol != 0 and _close(out, expected, atol)


def _judge(result: sandbox.Result, expected: list, target: dict) -> dict:
  """pass / fail / error / timeout, and base and plus, from a candidate's sandbox result."""
  inputs, num_base = target["base_input"] + target["plus_input"], len(target["base_input"])
  good = [matches(out, exp, target["atol"], args, target["oracle"])
          for out, exp, args in zip(result.outputs, expected, inputs, strict=False)]
  bad = good.index(False) if False in good else len(good)
  base_ok, plus_ok = bad >= num_base, bad == len(inputs)
  if plus_ok:
    return dict(status="pass", base=True, plus=True, failure=None, message=None)
  split, at = ("base", bad) if bad < num_base else ("plus", bad - num_base)
  if bad < len(good):
    message = (f"{split} input {at}: got {json.dumps(result.outputs[bad])[:100]}, expected "
               f"{json.dumps(expected[bad])[:100]}")
    return dict(status="fail", base=base_ok, plus=False, failure="wrong_output",
                message=message)
  message = f"{split} input {at}: {result.message}"
  return dict(status=result.status if result.status != "ok" else "error", base=base_ok,
              plus=False, failure=sandbox.failure_kind(result), message=message)


def _expected(problems, settings, isolated: bool) -> dict:
  """{problem id: reference outputs, or a sandbox.Result if the reference failed}, computed in a
  pass of their own and kept in memory for the other systems of this run."""
  keys = {p.id: hashlib.sha256(json.dumps(p.target, sort_keys=True).encode()).hexdigest()
          for p in problems}
  todo = [p for p in problems if keys[p.id] not in _EXPECTED]
  results = _run([_job(p.target["reference"], p.target) for p in todo], settings, isolated)
  failed = {}
  for problem, result in zip(todo, results, strict=True):
    if result.status == "ok":
      _EXPECTED[keys[problem.id]] = result.outputs
    else:
      failed[problem.id] = result
  return {p.id: failed[p.id] if p.id in failed else _EXPECTED[keys[p.id]] for p in problems}


def _job(program: str, target: dict) -> sandbox.Job:
  program, entry_point = special.wrap(program, target["entry_point"], target["convert"])
  return sandbox.Job(program, entry_point, target["base_input"] + target["plus_input"])


def _run(jobs: list[sandbox.Job], settings, isolated: bool) -> list[sandbox.Result]:
  return sandbox.run_many(jobs, float(settings.timeout_s), settings.memory_mb, settings.workers,
                          settings.output_mb, isolated)


def make(name: str, dataset: str) -> Benchmark:
  """The HumanEval+ or MBPP+ benchmark: same protocol, different data and special cases."""

  def score(problems: list[Problem], completions: list[str],
            settings: ml_collections.ConfigDict) -> list[dict]:
    """Per problem: "correct" (= plus), base, plus, status, message, "extracted" (the program),
    "isolated" and "sandbox" (the sandbox.MECHANISMS name that isolated it, or "none"),
    "format_valid" (the sanitized program gives the entry point a body: right or wrong, an
    answer in the benchmark's format).
    Expected outputs stay in the scorer's memory, never in a file, where a program run
    unisolated could rewrite them."""
    safe = isolated(settings, f"benchmarks.{name}")
    mechanism = sandbox.mechanism() if safe else "none"  # which one isolated the row
    expected = _expected(problems, settings, safe)
    programs = [sanitize(p.prompt + c, p.target["entry_point"])
                for p, c in zip(problems, completions, strict=True)]
    results = _run([_job(program, p.target)
                    for p, program in zip(problems, programs, strict=True)], settings, safe)
    out = []
    for problem, program, result in zip(problems, programs, results, strict=True):
      reference = expected[problem.id]
      if isinstance(reference, sandbox.Result):
        verdict = dict(status="error", base=False, plus=False, failure="reference",
                       message=f"reference solution: {reference.message}")
      else:
        verdict = _judge(result, reference, problem.target)
      valid = _has_body(program, problem.target["entry_point"])
      out.append(dict(correct=verdict["plus"], extracted=program, isolated=safe,
                      sandbox=mechanism, format_valid=valid, **verdict))
    return out

  return Benchmark(name, default_settings, validate, lambda settings: load(settings, dataset),
                   STOP_STRINGS, score, headline="pass@1 (plus)")


HUMANEVAL_PLUS = make("humaneval_plus", "humaneval")
MBPP_PLUS = make("mbpp_plus", "mbpp")
