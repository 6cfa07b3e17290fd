"""Trains all seeds and sweep values of a config in one program; resumes an existing workdir.

  python experiments/train.py --config=configs/hyperteacher.py:quick --workdir=/tmp/ht_quick
  python experiments/train.py --config=configs/hyperteacher.py:paper --workdir=/x --print_config
"""

from absl import flags
from ml_collections import config_flags

from compgen_jax import cli
from compgen_jax.analysis import curves, report
from compgen_jax.scaling import config as training_config
from compgen_jax.scaling import train as scaling_train
from compgen_jax.training import sharding

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file with preset, e.g. "
                                          "configs/hyperteacher.py:quick.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for config.json, metrics and "
                               "checkpoints; an existing one is resumed.")
cli.mark_required(["config", "workdir"])


def main(argv):
  del argv
  cli.quiet_logging()
  rows = scaling_train.train_and_evaluate(_CONFIG.value, _WORKDIR.value)
  if sharding.is_main_process():  # the workdir's one writer
    curves.plot_curves(_WORKDIR.value)
  print(report.final_table(rows, _WORKDIR.value))


if __name__ == "__main__":
  cli.run(main, resolve=training_config.resolved)
