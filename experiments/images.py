"""Image composition: trains (seeds x coverage vmapped; one program per width), evaluates and
probes the checkpoints, writes report.md; re-running resumes.

  python experiments/images.py --config=configs/images.py:cpu --workdir=results/cpu/images
  python experiments/images.py --config=configs/images.py:tiny --workdir=/tmp/img --mode=train
  python experiments/images.py --config=configs/images.py:tiny --workdir=/tmp/img --mode=evaluate
"""

from absl import flags
from ml_collections import config_flags

from compgen_jax import cli
from compgen_jax.images import experiment

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file with preset, e.g. "
                                          "configs/images.py:cpu.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory of the programs, eval/probe rows and "
                               "report.md; an existing one is resumed.")
_MODE = flags.DEFINE_enum("mode", "all", list(experiment.MODES), "train, evaluate (and probe) the "
                          "checkpoints, report, or all three.")
_STEP = flags.DEFINE_integer("step", None, "Checkpoint step to evaluate (default: the latest).")
_EVERY = flags.DEFINE_bool("every", False, "Evaluate and probe every checkpoint (a re-run "
                           "replaces the rows of its steps).")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
  del argv
  cli.quiet_logging()
  print(experiment.run(_CONFIG.value, _WORKDIR.value, _MODE.value, _STEP.value, _EVERY.value))


if __name__ == "__main__":
  cli.run(main)
