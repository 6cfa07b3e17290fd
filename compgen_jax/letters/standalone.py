"""The letter experiments as a standalone pass over a trained workdir's checkpoints; never trains.

  python experiments/evaluate.py --workdir=W --experiments=substitution \
      --config.compose.kl_threshold=0.05

The config is W/config.json with the `--config.<field>=...` overrides applied (cli.with_overrides).
Only fields that do not change what was trained may differ (config.EVALUATION_FIELDS, the letters
app's `overridable`); any other difference is a ConfigError naming the field. The requested
experiments may read only models W trained: the saved config's `registry.scratch_tasks` /
`finetune_runs`, which also fix the checkpoints' stacked layout the models are restored against.
Results: every requested experiment runs first; then each one's rows and plot replace
W/<name>/results.jsonl and plot.png by atomic renames, so a failing pass leaves earlier results
byte-identical. Nothing else in W is written: no training metrics, no checkpoint. The checkpoints
are each phase's final one, picked by training.passes.select_steps as every checkpoint pass picks
its steps; the rows are per experiment, not per checkpoint step, so a re-run replaces an
experiment's results.jsonl whole (where the other passes replace the rows of their step:
training.passes.write_pass).
"""

import os
import time

import ml_collections

from compgen_jax import workdir as workdir_lib
from compgen_jax.composition import spec
from compgen_jax.letters import config, registry, runner, zoo
from compgen_jax.types import ConfigError


def with_defaults(cfg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """`cfg` (a saved one: tuples as in configs/letters.py, locked) with the fields a run saved
  before they existed lacks, at the defaults it ran with: the compose step spec and sampling
  filters, and model.init (flax's)."""
  cfg = ml_collections.ConfigDict(workdir_lib.as_tuples(workdir_lib.config_dict(cfg)))
  if "model" in cfg and "init" not in cfg.model:
    cfg.model.init = "flax"
  for field, value in {**spec.spec_fields(), **spec.truncation_fields()}.items():
    if "compose" in cfg and field not in cfg.compose:
      cfg.compose[field] = value
  cfg.lock()
  return cfg


def saved_config(workdir: str) -> ml_collections.ConfigDict:
  """The config W was trained with (locked, tuples as in configs/letters.py)."""
  if not os.path.isdir(workdir):
    raise ConfigError("workdir", f"{workdir!r} does not exist or is not a directory")
  return with_defaults(workdir_lib.load_config(workdir))


def check_trained(saved: ml_collections.ConfigDict, cfg: ml_collections.ConfigDict,
                  workdir: str) -> None:
  """ConfigError naming the models the requested experiments read that W did not train."""
  tasks, runs = registry.scratch_tasks(saved), registry.finetune_runs(saved)
  missing = {}
  for name in cfg.experiments:
    exp = registry.EXPERIMENTS[name]
    need = [t for t in exp.tasks(cfg) if t not in tasks] + [
        f"{e} fine-tuned ({r})" for e, r in exp.finetuned(cfg) if (e, r) not in runs]
    if need:
      missing[name] = list(dict.fromkeys(need))
  if missing:
    needs = "; ".join(f"{n!r} needs {', '.join(m)}" for n, m in missing.items())
    tuned = f" and fine-tuned {', '.join(f'{e} ({r})' for e, r in runs)}" if runs else ""
    raise ConfigError("experiments", f"{needs}: not trained in {workdir!r} (it trained "
                      f"{', '.join(tasks)}{tuned} for {tuple(saved.experiments)}; evaluate-only "
                      "never trains). To train them, run experiments/train.py with "
                      f"{tuple(missing)} in --config.experiments and these compose/finetune "
                      "settings, in a new --workdir (a workdir's config fixes what it trains)")


def evaluate(cfg: ml_collections.ConfigDict, workdir: str,
             experiments: list[str] | None = None) -> dict[str, list[dict]]:
  """Restores W's models and runs `experiments` (default cfg.experiments) over them; writes
  W/<name>/results.jsonl and plot.png once all have run and returns the rows by name."""
  saved = saved_config(workdir)
  cfg = with_defaults(cfg)
  if experiments:
    cfg = cfg.copy_and_resolve_references()
    cfg.experiments = tuple(experiments)
  try:
    config.validate(cfg)
  except (AttributeError, KeyError, TypeError) as e:  # a config.json from another code version
    raise ConfigError("workdir", f"the config in {workdir!r} is incompatible with this code "
                      f"({type(e).__name__}: {e})") from e
  workdir_lib.check_unchanged(saved, cfg, config.EVALUATION_FIELDS, "an evaluate-only pass")
  check_trained(saved, cfg, workdir)
  start = time.time()
  trained = registry.scratch_tasks(saved), registry.finetune_runs(saved)
  models = zoo.restore_zoo(cfg, workdir, trained, registry.scratch_tasks(cfg),
                           registry.finetune_runs(cfg))
  results = dict(runner.run_experiments(cfg, models, start))
  staged = [s for name, rows in results.items() for s in runner.stage(workdir, name, rows)]
  runner.commit(staged)
  return results
