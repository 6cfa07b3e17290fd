"""The hostile-completion bench shared by the sandbox attack tests: a one-problem HumanEval+ file
(HumanEval/0), scoring through the real scorer here or in a fresh process, and the unisolated
control."""

import json
import os
import subprocess
import sys

import pytest

from compgen_jax.llm_eval import evalplus, sandbox
from tests.helpers import REPO

isolation = sandbox.isolation_problem()
needs_isolation = pytest.mark.skipif(
    isolation is not None, reason=f"no sandbox isolation here: {isolation}")
PROMPT = ('from typing import List\n\n\ndef has_close_elements(numbers: List[float], threshold: '
          'float) -> bool:\n    """Whether any two numbers are closer than threshold."""\n')
CANONICAL = ("    return any(abs(a - b) < threshold for i, a in enumerate(numbers)\n"
             "               for b in numbers[i + 1:])\n")
BASE = [[[1.0, 2.0, 3.0], 0.5], [[1.0, 2.8, 3.0], 0.3]]  # False, True
PLUS = [[[1.0, 2.0, 3.9, 4.0], 0.2], [[5.0], 1.0]]  # True, False
WRONG = "    return 0\n"


def make_bench(tmp_path):
  """(dataset path, settings) of a one-problem HumanEval+ file shaped like HumanEval/0."""
  path = tmp_path / "HumanEvalPlus.jsonl"
  path.write_text(json.dumps(dict(task_id="HumanEval/0", prompt=PROMPT, entry_point=
                                  "has_close_elements", canonical_solution=CANONICAL,
                                  base_input=BASE, plus_input=PLUS)) + "\n")
  settings = evalplus.default_settings()
  settings.update(path=str(path), timeout_s=5.0, memory_mb=512)
  return str(path), settings


def score(settings, *bodies):
  """The scorer's rows for completions of the problem (function bodies)."""
  problems = evalplus.HUMANEVAL_PLUS.load(settings)
  return evalplus.HUMANEVAL_PLUS.score(problems * len(bodies), list(bodies), settings)


def failed(row) -> bool:
  return row["status"] != "pass" and not row["correct"] and not row["plus"]


# The mechanism that must isolate jobs: root's for root, a user namespace for anyone else.
EXPECTED = sandbox.ROOT if os.geteuid() == 0 else sandbox.USER_NAMESPACE


def contained(row) -> bool:
  """Scored a failure, and the row says the expected mechanism isolated it."""
  return failed(row) and row["isolated"] is True and row["sandbox"] == EXPECTED


def unisolated(monkeypatch, settings):
  """The settings, forced through the unisolated fallback (for the harmless controls)."""
  monkeypatch.setattr(sandbox, "isolation_problem", lambda: "forced off for a control")
  settings.allow_unisolated = True
  return settings


def body(code: str) -> str:
  return "".join(f"    {line}\n" for line in code.strip("\n").splitlines())


# Scores one completion in a fresh process (its own environment, its own peak memory), isolated
# and, for a control, unisolated; argv: settings JSON, the completion, the modes.
SCRIPT = """
import json, resource, sys
from compgen_jax.llm_eval import evalplus, sandbox
from tests.sandbox_bench import score
settings = evalplus.default_settings()
settings.update(json.loads(sys.argv[1]))
for mode in sys.argv[3].split(","):
  if mode == "unisolated":
    sandbox.isolation_problem = lambda: "forced off for a control"
    settings.allow_unisolated = True
  before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  [row] = score(settings, sys.argv[2])
  grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
  print(json.dumps(dict(row=row, grown_mb=grown_mb)))
"""


def score_elsewhere(settings, completion: str, modes=("isolated",), prelude: str = "", **env
                    ) -> list[dict]:
  """SCRIPT's rows; prelude: code the scoring process runs first (to plant a secret)."""
  proc = subprocess.run(
      [sys.executable, "-c", prelude + SCRIPT, json.dumps(settings.to_dict()), completion,
       ",".join(modes)],
      capture_output=True, text=True, timeout=120, cwd=REPO,
      env=dict(os.environ, PYTHONPATH=REPO, **env))
  assert proc.returncode == 0, proc.stderr[-2000:]
  return [json.loads(line) for line in proc.stdout.splitlines()]
