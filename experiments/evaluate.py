"""Runs a workdir's evaluation over its saved checkpoints, for the application its config.json
names (apps.py); the scaling experiment's evaluators write rows to <workdir>/eval.jsonl
(replacing those of the steps it evaluates again).

  python experiments/evaluate.py --workdir=/tmp/ht_quick            # latest checkpoint
  python experiments/evaluate.py --workdir=/tmp/ht_quick --every    # every checkpoint (+ curve)
  python experiments/evaluate.py --workdir=/tmp/ht_quick --step=2000 --evaluators=id,ood
  python experiments/evaluate.py --workdir=/tmp/images_tiny --every  # an image program
  python experiments/evaluate.py --workdir=/tmp/letters_tiny --experiments=baselines \
      --config.compose.ta_lambdas="(0.25,0.5)"      # letters: rerun experiments over its models
  python experiments/evaluate.py --workdir=/tmp/llm_cpu  # llm: its compositions' diagnostics
                                                         # per problem, AUC for failure

`--config.<field>=value` overrides the workdir's config.json where the application allows an
evaluation to (apps.App.overridable: letters' evaluation settings; cli.with_overrides); one that
would change what the checkpoints depend on is refused naming the field. Training artifacts are
never modified. Exit status 2 with a message on a bad workdir, checkpoint or override.
"""

from absl import flags

from compgen_jax import apps, cli

_WORKDIR = flags.DEFINE_string("workdir", None, "A trained workdir (config.json, checkpoints/).")
_STEP = flags.DEFINE_integer("step", None, "Checkpoint step (default: the latest).")
_EVERY = flags.DEFINE_bool("every", False, "Evaluate every saved checkpoint.")
_EVALUATORS = flags.DEFINE_list("evaluators", [], "Evaluator names (default: all that apply "
                                "to the task family), with their settings from the workdir's "
                                "config evals section, else the defaults.")
_EXPERIMENTS = flags.DEFINE_list("experiments", None, "letters: the experiments to run over the "
                                 "trained models (default: the config's experiments).")
cli.mark_required(["workdir"])


def main(argv):
  cli.quiet_logging()
  app, saved = apps.of_workdir(_WORKDIR.value)
  experiments = _EXPERIMENTS.value and tuple(_EXPERIMENTS.value)
  cfg = cli.with_overrides(saved, argv[1:], app.overridable, f"a {app.name} evaluation",
                           {"experiments": experiments})
  print(apps.stage(app, "evaluate")(cfg, _WORKDIR.value, _STEP.value, _EVERY.value,
                                    _EVALUATORS.value or None))


if __name__ == "__main__":
  cli.run(main, overrides=True)
