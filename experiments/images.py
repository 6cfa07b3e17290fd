"""Image composition, one program (seeds x coverage vmapped): trains, evaluates and probes the
checkpoints, writes report.md; re-running resumes. The widths of the experiment are one program
each, launched by experiments/sweep.py with configs/sweeps/images.py.

  python experiments/images.py --config=configs/images.py:tiny --workdir=/tmp/img
  python experiments/images.py --config=configs/images.py:tiny --workdir=/tmp/img --mode=train
  python experiments/images.py --config=configs/images.py:tiny --workdir=/tmp/img --mode=evaluate
  python experiments/images.py --mode=report --workdir=results/cpu/images  # every program there
"""

from absl import flags
from ml_collections import config_flags

from compgen_jax import cli
from compgen_jax.images import experiment

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file with preset, e.g. "
                                          "configs/images.py:cpu.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "The program's directory (checkpoints, eval/probe "
                               "rows, report.md); an existing one is resumed. For --mode=report: "
                               "a program or a directory of programs (a sweep dir).")
_MODE = flags.DEFINE_enum("mode", "all", list(experiment.MODES), "train, evaluate the "
                          "checkpoints, probe them, report (needs no --config), or all four.")
_STEP = flags.DEFINE_integer("step", None, "Checkpoint step to evaluate (default: the latest).")
_EVERY = flags.DEFINE_bool("every", False, "Evaluate and probe every checkpoint (a re-run "
                           "replaces the rows of its steps).")
cli.mark_required(["workdir"])


def main(argv):
  del argv
  cli.quiet_logging()
  print(experiment.run(_CONFIG.value, _WORKDIR.value, _MODE.value, _STEP.value, _EVERY.value))


if __name__ == "__main__":
  cli.run(main)
