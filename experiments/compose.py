"""Logit composition of letter-substitution LMs: trains the models, runs the experiments.

  python experiments/compose.py --config=configs/letters.py:quick --workdir=/tmp/letters_quick
  python experiments/compose.py --config=configs/letters.py:tiny --workdir=/tmp/letters_tiny \
      --config.experiments="('substitution','baselines')"

Each experiment writes <workdir>/<name>/results.jsonl and plot.png; training metrics go to
<workdir>/metrics.jsonl and trained models to <workdir>/checkpoints (restored on a rerun).
A bad or unknown config field is one line on stderr and exit status 2.
"""

from absl import flags
from ml_collections import config_flags

from compgen_jax import cli
from compgen_jax.letters import runner

_CONFIG = config_flags.DEFINE_config_file("config", None, "configs/letters.py:<preset>",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "where tables, plots and checkpoints go")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
  del argv
  cli.quiet_logging()
  with cli.user_errors():
    runner.run(_CONFIG.value, _WORKDIR.value)


if __name__ == "__main__":
  cli.run(main)
