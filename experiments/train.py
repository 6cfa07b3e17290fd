"""Runs a config's program in a workdir: every application's (apps.py), the one its config names
(`app`), validated by it first; trains all seeds and sweep values in one program and resumes an
existing workdir.

  python experiments/train.py --config=configs/hyperteacher.py:quick --workdir=/tmp/ht_quick
  python experiments/train.py --config=configs/images.py:tiny --workdir=/tmp/images_tiny
  python experiments/train.py --config=configs/hyperteacher.py:paper --print_config
"""

from absl import flags
from ml_collections import config_flags

from compgen_jax import apps, cli

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file with preset, e.g. "
                                          "configs/hyperteacher.py:quick.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for config.json, metrics and "
                               "checkpoints; an existing one is resumed.")
cli.mark_required(["config", "workdir"])


def main(argv):
  del argv
  cli.quiet_logging()
  summary = apps.train(_CONFIG.value, _WORKDIR.value)
  if summary:  # llm's run prints its own table as it goes
    print(summary)


if __name__ == "__main__":
  cli.run(main, resolve=lambda cfg: apps.of_config(cfg).resolve(cfg))
