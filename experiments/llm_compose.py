"""Logit composition of local Gemma-2 checkpoints on GSM8K, MATH, HumanEval+ and MBPP+.

  python experiments/llm_compose.py --config=configs/llm.py:cpu --workdir=/tmp/llm_cpu
  python experiments/llm_compose.py --config=configs/llm.py:paper --workdir=W \
      --config.models.base=DIR ...   (the full command is in configs/llm.py)

Per benchmark and system: WORKDIR/<benchmark>/<system>.jsonl (one row per problem: completion,
score, diagnostics); WORKDIR/summary.jsonl, report.md, accuracy.png, diagnostics.png. A rerun
resumes where it stopped. A bad config, a missing checkpoint or data file is one line on stderr
and exit status 2, before any model is read.
"""

from absl import flags
from ml_collections import config_flags

from compgen_jax import cli
from compgen_jax.llm_eval import runner

_CONFIG = config_flags.DEFINE_config_file("config", None, "configs/llm.py:<preset>",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "where results, converted models and the "
                               "report go")
cli.mark_required(["config", "workdir"])


def main(argv):
  del argv
  cli.quiet_logging()
  runner.run(_CONFIG.value, _WORKDIR.value)


if __name__ == "__main__":
  cli.run(main)
