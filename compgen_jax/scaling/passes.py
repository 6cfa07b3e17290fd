"""The scaling experiment's evaluators and probes as standalone passes over a workdir's saved
checkpoints.

The passes read config.json and checkpoints/ and write only eval.jsonl / probes.jsonl and the
eval curve PNG (their binaries hold the workdir's lock: cli.run); training artifacts are never
modified. They give the engine one-run functions (the evaluators, probes.probe_run) and the
engine's pass does the rest: the checkpoints, restore, placement, vmap, rows
(training/passes.py: over_checkpoints).
"""

import os
from typing import NamedTuple

import jax
import ml_collections

from compgen_jax import workdir as workdir_lib
from compgen_jax.encodings import registry as encodings
from compgen_jax.scaling import activations, evaluators, probes, runs
from compgen_jax.scaling import config as train_config
from compgen_jax.scaling import train as scaling_train
from compgen_jax.students import registry as students
from compgen_jax.tasks import registry as families
from compgen_jax.training import loop
from compgen_jax.training.passes import over_checkpoints
from compgen_jax.types import ConfigError, PyTree


class Workdir(NamedTuple):
  path: str
  cfg: ml_collections.ConfigDict
  grid: list[dict]
  inputs: tuple  # init_one's inputs, the splits as shapes: what checkpoints restore against
  abstract: PyTree  # shapes of the run-stacked state

  @property
  def checkpoints(self) -> str:
    return os.path.join(self.path, workdir_lib.CHECKPOINT_DIR)


def open_workdir(path: str) -> Workdir:
  """Config, run grid and abstract state of a trained workdir; ConfigError when it is unusable."""
  if not os.path.isdir(path):
    raise ConfigError("workdir", f"{path!r} does not exist or is not a directory")
  cfg = workdir_lib.load_config(path)  # ConfigError for a missing, non-JSON or non-dict file
  missing = missing_fields(cfg)
  if missing:
    raise ConfigError(missing[0], f"missing from the config in {path!r} (written by an older "
                      f"version; fields missing: {', '.join(missing)}); retrain the workdir")
  try:
    runs.validate(cfg)
    grid = runs.run_grid(cfg)
    grid = runs.precompute_splits(cfg, grid)
    inputs = scaling_train.abstract_inputs(cfg, grid)
    abstract = loop.abstract_state(scaling_train.init_one(cfg), inputs)
  except (AttributeError, KeyError, TypeError) as e:
    raise ConfigError("workdir", f"the config in {path!r} is incompatible with this code "
                      f"({type(e).__name__}: {e})") from e
  return Workdir(path, cfg, grid, inputs, abstract)


def missing_fields(cfg: ml_collections.ConfigDict) -> list[str]:
  """The config fields of today's sections a workdir written by an earlier version lacks."""
  defaults = {"encoding": encodings.default_config, "student": students.default_config,
              "probe": probes.default_config, "train": lambda: train_config.base_config().train,
              "optim": lambda: train_config.base_config().optim}
  if cfg.get("task") and cfg.task.get("family") in families.REGISTRY:
    defaults["task"] = families.get(cfg.task.family).default_config
  missing = [] if "evals" in cfg else ["evals"]
  for section, make in defaults.items():
    if section not in cfg:
      missing.append(section)
      continue
    missing += _missing_leaves(make(), cfg[section], section)
  return missing


def _missing_leaves(default: ml_collections.ConfigDict, cfg: ml_collections.ConfigDict,
                    prefix: str) -> list[str]:
  """The fields of `default` (subsections down to their leaves, e.g. student.mlp.width for a
  flat student section) that `cfg` lacks."""
  missing = []
  for key, value in default.items():
    if isinstance(value, ml_collections.ConfigDict):
      have = cfg.get(key)
      if not isinstance(have, ml_collections.ConfigDict):
        have = ml_collections.ConfigDict()
      missing += _missing_leaves(value, have, f"{prefix}.{key}")
    elif key not in cfg:
      missing.append(f"{prefix}.{key}")
  return missing


def evaluate_workdir(path: str, step: int | None = None, every: bool = False,
                     names=None) -> list[dict]:
  """Runs the named evaluators on the selected checkpoints (the engine's pass:
  training.passes.over_checkpoints); writes one row per step and run to eval.jsonl (replacing
  the rows of those steps) and returns the rows.

  The default is every evaluator that applies to the family, not only those training ran: a
  standalone pass is where the costlier ones (ood_hotness, r2_quantiles) are usually computed.
  Each uses its settings from cfg.evals when it has an entry there, else its defaults
  (evaluators.evals_config), so the numbers match what training computed; a config.json without
  `evals` is refused (open_workdir). With several steps, experiments/evaluate.py draws the OOD
  R^2 curve over checkpoints from the rows.
  """
  wd = open_workdir(path)
  names = tuple(names or evaluators.applicable(wd.cfg))
  return over_checkpoints(path, scaling_train.init_one(wd.cfg), wd.inputs, wd.grid,
                          scaling_train.evaluators_one(wd.cfg, names), workdir_lib.EVAL_FILE,
                          step, every, consts=(scaling_train.task_bits(wd.cfg),))


def probe_workdir(path: str, step: int | None = None, every: bool = False) -> list[dict]:
  """Probes every layer of every run on the selected checkpoints (the engine's pass); writes one
  row per step, run and lambda to probes.jsonl (replacing the rows of those steps) and returns
  the rows."""
  wd = open_workdir(path)
  probes.validate(wd.cfg)
  names = activations.layer_names(jax.tree.map(lambda a: jax.ShapeDtypeStruct(
      a.shape[1:], a.dtype), wd.abstract), wd.cfg)
  # on one device: the probe program hangs on XLA:CPU when its input is replicated or sharded
  # over several (forced host) devices, so the first device probes every run
  return over_checkpoints(
      path, scaling_train.init_one(wd.cfg), wd.inputs, wd.grid,
      {"probe": probes.probe_one(wd.cfg)}, workdir_lib.PROBE_FILE, step, every,
      consts=(scaling_train.task_bits(wd.cfg),),
      rows=lambda s, result, state: probes.rows(result, names, wd.cfg, s, wd.grid),
      placement="one_device")


def probe_table(rows: list[dict]) -> tuple[list[str], list[list]]:
  """(header, body) of probe R^2: one line per step, run, lambda, target and split; one column
  per layer ('input' = input decoder, the student's layers = task decoders) and the best layer."""
  layers = [k.split("/")[1] for k in rows[0] if k.endswith("/id_r2") and "/best/" not in k]
  layers = list(dict.fromkeys(layers))
  targets = list(dict.fromkeys(k.split("/")[0] for k in rows[0] if k.endswith("/best_layer")))
  body = [[r["step"], r["run"], r["lambda"], t, split,
           *(r.get(f"{t}/{layer}/{split}_r2", float("nan")) for layer in layers),
           r[f"{t}/best_layer"], r[f"{t}/best/{split}_r2"]]
          for r in rows for t in targets for split in probes.SPLITS]
  return ["step", "run", "lambda", "target", "split", *layers, "best", "best_r2"], body
