"""The scaling experiment's evaluators and probes as standalone passes over a workdir's saved
checkpoints.

The passes read config.json and checkpoints/ and write only eval.jsonl / probes.jsonl and the
eval curve PNG (their binaries hold the workdir's lock: cli.run); training artifacts are never
modified. Which checkpoints and how rows are replaced is every family's mechanism
(training/passes.py: select_steps, write_pass).
"""

import os
from typing import NamedTuple

import jax
import ml_collections
import numpy as np

from compgen_jax import workdir as workdir_lib
from compgen_jax.encodings import registry as encodings
from compgen_jax.scaling import activations, evaluators, probes, runs
from compgen_jax.scaling import config as train_config
from compgen_jax.scaling import train as scaling_train
from compgen_jax.students import registry as students
from compgen_jax.tasks import registry as families
from compgen_jax.training import loop, sharding
from compgen_jax.training.passes import select_steps, write_pass
from compgen_jax.types import CheckpointError, ConfigError, PyTree


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


def restore(wd: Workdir, step: int) -> PyTree:
  """The run-stacked state saved at `step` (CheckpointError if missing, corrupt or mismatched)."""
  _, state = loop.restore(wd.path, scaling_train.init_one(wd.cfg), wd.inputs, step)
  saved = np.asarray(state.step)
  if not np.all(saved == step):
    raise CheckpointError(f"checkpoint {wd.checkpoints!r} step {step} holds states of step(s) "
                          f"{sorted(set(saved.tolist()))}")
  return state


def _placement(wd: Workdir):
  """The run mesh over every device (as training uses) and the task table replicated on it:
  a pass evaluates each device's runs there, padded to a multiple of the devices."""
  mesh = sharding.make_mesh()
  return mesh, sharding.replicate(scaling_train.task_bits(wd.cfg), mesh)


def _real_runs(out: PyTree, wd: Workdir) -> PyTree:
  """Run-stacked outputs on the host, whole on every process, without the padding runs."""
  return jax.tree.map(lambda a: np.asarray(a)[:len(wd.grid)], sharding.to_host(out))


def _run_info(grid: list[dict]) -> list[dict]:
  return [dict(run) for run in grid]


def evaluate_workdir(path: str, step: int | None = None, every: bool = False,
                     names=None) -> list[dict]:
  """Runs the named evaluators on the selected checkpoints; writes one row per step and run to
  eval.jsonl (replacing the rows of those steps) and returns the rows.

  The default is every evaluator that applies to the family, not only those training ran: a
  standalone pass is where the costlier ones (ood_hotness, r2_quantiles) are usually computed.
  Each uses its settings from cfg.evals when it has an entry there, else its defaults
  (evaluators.evals_config), so the numbers match what training computed; a config.json without
  `evals` is refused (open_workdir). With several steps, experiments/evaluate.py draws the OOD
  R^2 curve over checkpoints from the rows.
  """
  wd = open_workdir(path)
  names = tuple(names or evaluators.applicable(wd.cfg))
  evaluate = scaling_train.make_evaluate(wd.cfg, names)
  steps = select_steps(wd.checkpoints, step, every)
  mesh, bits_T = _placement(wd)

  def rows_of_step(s: int) -> list[dict]:
    metrics = _real_runs(evaluate(sharding.shard_runs(restore(wd, s), mesh), bits_T), wd)
    return [{"step": s, **info, **{k: float(v[r]) for k, v in sorted(metrics.items())}}
            for r, info in enumerate(_run_info(wd.grid))]

  return write_pass(os.path.join(path, workdir_lib.EVAL_FILE), steps, rows_of_step)


def probe_workdir(path: str, step: int | None = None, every: bool = False) -> list[dict]:
  """Probes every layer of every run on the selected checkpoints; writes one row per step, run
  and lambda to probes.jsonl (replacing the rows of those steps) and returns the rows."""
  wd = open_workdir(path)
  probe = probes.make_probe(wd.cfg)
  steps = select_steps(wd.checkpoints, step, every)
  names = activations.layer_names(jax.tree.map(lambda a: jax.ShapeDtypeStruct(
      a.shape[1:], a.dtype), wd.abstract), wd.cfg)
  # on one device: the probe program hangs on XLA:CPU when its input is replicated or sharded
  # over several (forced host) devices, so the first device probes every run
  one = jax.local_devices()[0]
  bits_T = jax.device_put(scaling_train.task_bits(wd.cfg), one)

  def rows_of_step(s: int) -> list[dict]:
    result = _real_runs(probe(jax.device_put(restore(wd, s), one), bits_T), wd)
    return probes.rows(result, names, wd.cfg, s, _run_info(wd.grid))

  return write_pass(os.path.join(path, workdir_lib.PROBE_FILE), steps, rows_of_step)


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
