"""The letter experiments as a standalone pass over a trained workdir's checkpoints; never trains.

  python experiments/compose.py --workdir=W --evaluate_only --experiments=substitution \
      --config.compose.kl_threshold=0.05

The config is W/config.json (`--config.<field>=...` overrides apply to it; a full --config is
compared with it). Only fields that do not change what was trained may differ (EVALUATION_FIELDS);
any other difference is a ConfigError naming the field. The requested experiments may read only
models W trained: the saved config's `registry.scratch_tasks` / `finetune_runs`, which also fix
the checkpoints' stacked layout the models are restored against. Results: every requested
experiment runs first; then each one's rows and plot replace W/<name>/results.jsonl and plot.png
by atomic renames, so a failing pass leaves earlier results byte-identical. Nothing else in W is
written: no training metrics, no checkpoint. The checkpoints are each phase's final one, picked
by training.passes.select_steps as every checkpoint pass picks its steps; the rows are per
experiment, not per checkpoint step, so a re-run replaces an experiment's results.jsonl whole
(where the other passes replace the rows of their step: training.passes.write_pass).
"""

import os
import re
import time

import ml_collections
from absl import flags

from compgen_jax import workdir as workdir_lib
from compgen_jax.composition import spec
from compgen_jax.letters import config, registry, runner, zoo
from compgen_jax.types import ConfigError

# May differ from the trained config (the task lists are checked against the checkpoints).
EVALUATION_FIELDS = ("preset", "experiments", "compose", "finetune.regimes", "data.test_size",
                     "data.length_max", "data.length_per_len", "train.progress")
_EVALUATE_ONLY = re.compile(r"^--?evaluate_only(=(true|True|1))?$")
_CONFIG_GIVEN = re.compile(r"^--?config(=|$)")


def _tuples(value):
  """JSON lists back to the tuples the config files use."""
  if isinstance(value, dict):
    return {k: _tuples(v) for k, v in value.items()}
  return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def saved_config(workdir: str) -> ml_collections.ConfigDict:
  """The config W was trained with (locked, tuples as in configs/letters.py)."""
  if not os.path.isdir(workdir):
    raise ConfigError("workdir", f"{workdir!r} does not exist or is not a directory")
  cfg = workdir_lib.load_config(workdir)
  cfg = ml_collections.ConfigDict(_tuples(workdir_lib.config_dict(cfg)))
  # a run saved before the step spec and sampling filters existed decoded with their defaults
  for field, value in {**spec.spec_fields(), **spec.truncation_fields()}.items():
    if "compose" in cfg and field not in cfg.compose:
      cfg.compose[field] = value
  cfg.lock()
  return cfg


def get_config(workdir: str) -> ml_collections.ConfigDict:
  """The --config file of `compose.py --evaluate_only` without --config (see `config_argv`)."""
  try:
    return saved_config(workdir)
  except ConfigError as e:  # a flags error: cli.parse_flags prints one line, exit 2
    raise flags.IllegalFlagValueError(str(e)) from None


def config_argv(argv: list[str]) -> list[str]:
  """With --evaluate_only and no --config, inserts --config=<this file>:<workdir> first, so the
  workdir's config is the one `--config.<field>=...` overrides apply to."""
  workdir = next((a.split("=", 1)[1] for a in argv if a.startswith("--workdir=")), None)
  if workdir is None and "--workdir" in argv[:-1]:
    workdir = argv[argv.index("--workdir") + 1]
  if (workdir is None or not any(_EVALUATE_ONLY.match(a) for a in argv)
      or any(_CONFIG_GIVEN.match(a) for a in argv)):
    return argv
  return [argv[0], f"--config={os.path.abspath(__file__)}:{workdir}", *argv[1:]]


def check_overrides(saved: ml_collections.ConfigDict, cfg: ml_collections.ConfigDict) -> None:
  """ConfigError naming the first field outside EVALUATION_FIELDS where `cfg` differs."""
  old = workdir_lib.flatten(workdir_lib.config_dict(saved))
  new = workdir_lib.flatten(workdir_lib.config_dict(cfg))
  changed = [k for k in sorted(set(old) | set(new)) if old.get(k, "<absent>") != new.get(
      k, "<absent>") and not any(k == f or k.startswith(f + ".") for f in EVALUATION_FIELDS)]
  if changed:
    k = changed[0]
    raise ConfigError(k, f"is {new.get(k, '<absent>')!r} but the workdir trained with "
                      f"{old.get(k, '<absent>')!r} (also differs: {changed[1:] or 'nothing'}); "
                      f"an evaluate-only pass may change only {', '.join(EVALUATION_FIELDS)}")


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
                      "never trains). To train them, run experiments/compose.py without "
                      f"--evaluate_only, with {tuple(missing)} in --config.experiments and these "
                      "compose/finetune settings, in a new --workdir (a workdir's config fixes "
                      "what it trains)")


def evaluate(cfg: ml_collections.ConfigDict, workdir: str,
             experiments: list[str] | None = None) -> dict[str, list[dict]]:
  """Restores W's models and runs `experiments` (default cfg.experiments) over them; writes
  W/<name>/results.jsonl and plot.png once all have run and returns the rows by name."""
  saved = saved_config(workdir)
  if experiments:
    cfg = cfg.copy_and_resolve_references()
    cfg.experiments = tuple(experiments)
  try:
    config.validate(cfg)
  except (AttributeError, KeyError, TypeError) as e:  # a config.json from another code version
    raise ConfigError("workdir", f"the config in {workdir!r} is incompatible with this code "
                      f"({type(e).__name__}: {e})") from e
  check_overrides(saved, cfg)
  check_trained(saved, cfg, workdir)
  start = time.time()
  trained = registry.scratch_tasks(saved), registry.finetune_runs(saved)
  models = zoo.restore_zoo(cfg, workdir, trained, registry.scratch_tasks(cfg),
                           registry.finetune_runs(cfg))
  results = dict(runner.run_experiments(cfg, models, start))
  staged = [s for name, rows in results.items() for s in runner.stage(workdir, name, rows)]
  runner.commit(staged)
  return results
