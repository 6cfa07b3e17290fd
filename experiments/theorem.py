"""Theorem 3.1 made concrete: builds the explicit ReLU network, measures it, compares with SGD.

  python experiments/theorem.py --config=configs/theorem.py:quick --workdir=/tmp/theorem_quick
"""

import json

from absl import flags
from ml_collections import config_flags

from compgen_jax import cli
from compgen_jax.theory import experiment

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file with preset, e.g. "
                                          "configs/theorem.py:quick.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for config.json, theorem.jsonl, the "
                               "plots and the SGD runs.")
cli.mark_required(["config", "workdir"])


def main(argv):
  del argv
  cli.quiet_logging()
  summary = experiment.run(_CONFIG.value, _WORKDIR.value)
  print(json.dumps(summary, indent=1))


if __name__ == "__main__":
  cli.run(main)
