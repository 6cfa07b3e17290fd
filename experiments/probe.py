"""Linear probes of every layer over a workdir's checkpoints, for the application its
config.json names (apps.py); writes rows to probes.jsonl (replacing those of the steps it probes
again).

  python experiments/probe.py --workdir=/tmp/ht_quick            # latest checkpoint
  python experiments/probe.py --workdir=/tmp/ht_quick --every    # every checkpoint
  python experiments/probe.py --workdir=/tmp/images_tiny         # an image program

Ridge (intercept, lambdas from config.probe) fitted on half of the probe's ID tasks, scored on the
other half (ID) and on held-out tasks (OOD). Exit status 2 with a message on bad input.
"""

from absl import flags

from compgen_jax import apps, cli

_WORKDIR = flags.DEFINE_string("workdir", None, "A trained workdir (config.json, checkpoints/).")
_STEP = flags.DEFINE_integer("step", None, "Checkpoint step (default: the latest).")
_EVERY = flags.DEFINE_bool("every", False, "Probe every saved checkpoint.")
cli.mark_required(["workdir"])


def main(argv):
  del argv
  cli.quiet_logging()
  app, cfg = apps.of_workdir(_WORKDIR.value)
  print(apps.stage(app, "probe")(cfg, _WORKDIR.value, _STEP.value, _EVERY.value))


if __name__ == "__main__":
  cli.run(main)
