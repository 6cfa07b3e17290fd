"""Logit composition of letter-substitution LMs: trains the models, runs the experiments.

  python experiments/compose.py --config=configs/letters.py:quick --workdir=/tmp/letters_quick
  python experiments/compose.py --config=configs/letters.py:tiny --workdir=/tmp/letters_tiny \
      --config.experiments="('substitution','baselines')"
  python experiments/compose.py --workdir=/tmp/letters_tiny --evaluate_only \
      --experiments=baselines --config.compose.ta_lambdas="(0.25,0.5)"

Each experiment writes <workdir>/<name>/results.jsonl and plot.png; each training phase is a
loop workdir, <workdir>/scratch/ and <workdir>/finetune/ (config.json, metrics.jsonl,
checkpoints/: a killed run resumes from the last chunk; a finished phase is restored).
--evaluate_only never trains: it restores the workdir's models and reruns the experiments over
them with the workdir's config.json (overrides may change only evaluation settings); see
compgen_jax/letters/standalone.py. A bad or unknown config field, or a workdir without the
models asked for, is one line on stderr and exit status 2.
"""

import sys

from absl import flags
from ml_collections import config_flags

from compgen_jax import cli
from compgen_jax.letters import runner, standalone
from compgen_jax.types import ConfigError

_CONFIG = config_flags.DEFINE_config_file("config", None, "configs/letters.py:<preset> (with "
                                          "--evaluate_only: default the workdir's config.json)",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "where tables, plots and checkpoints go")
_EVALUATE_ONLY = flags.DEFINE_bool("evaluate_only", False, "Restore the workdir's trained "
                                   "models and run the experiments over them; never train.")
_EXPERIMENTS = flags.DEFINE_list("experiments", [], "With --evaluate_only: the experiments to "
                                 "run (default: the config's experiments).")
cli.mark_required(["workdir"])


def main(argv):
  del argv
  cli.quiet_logging()
  if _EVALUATE_ONLY.value:
    standalone.evaluate(_CONFIG.value, _WORKDIR.value, _EXPERIMENTS.value)
  elif _CONFIG.value is None or _EXPERIMENTS.value:
    raise ConfigError("config", "training needs --config=configs/letters.py:<preset> (and "
                      "--config.experiments); --experiments is for --evaluate_only")
  else:
    runner.run(_CONFIG.value, _WORKDIR.value)


if __name__ == "__main__":
  sys.argv = standalone.config_argv(sys.argv)
  cli.run(main)
