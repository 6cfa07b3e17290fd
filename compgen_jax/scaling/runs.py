"""The scaling experiment's run grid (seeds x array-valued sweep axes) and its config validation
before compiling."""

import itertools

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from compgen_jax import checks, rng
from compgen_jax.encodings import registry as encodings
from compgen_jax.scaling import evaluators
from compgen_jax.scaling.state import HPARAMS
from compgen_jax.students import registry as students
from compgen_jax.tasks import combinatorics, splits, supports
from compgen_jax.tasks import registry as families
from compgen_jax.training.config import validate_train
from compgen_jax.training.optim import validate_schedule
from compgen_jax.types import ConfigError

# Where each sweepable hyperparameter's scalar default lives in the config.
HPARAM_FIELDS = {"frac_ood": ("task", "frac_ood"), "learning_rate": ("optim", "learning_rate"),
                 "weight_decay": ("optim", "weight_decay")}


def sweep_values(cfg: ml_collections.ConfigDict, name: str) -> tuple[float, ...]:
  """The values of a sweep axis: cfg.sweep.<name> if non-empty, else the scalar default."""
  values = tuple(cfg.sweep[name])
  section, field = HPARAM_FIELDS[name]
  return tuple(float(v) for v in values) or (float(cfg[section][field]),)


def run_grid(cfg: ml_collections.ConfigDict) -> list[dict]:
  """One dict per run: its index, seed and hyperparameter values (seed-major order)."""
  axes = [range(cfg.num_seeds)] + [sweep_values(cfg, n) for n in HPARAMS]
  return [{"run": r, "seed": s, **dict(zip(HPARAMS, vals, strict=True))}
          for r, (s, *vals) in enumerate(itertools.product(*axes))]


def run_inputs(cfg: ml_collections.ConfigDict, grid: list[dict]) -> tuple[jax.Array, dict]:
  """Stacked keys [R] and hyperparameters {name: [R]} for jax.vmap(init_run)."""
  keys = jnp.stack([rng.run_key(cfg.seed, run["seed"]) for run in grid])
  hparams = {n: jnp.asarray([run[n] for run in grid], jnp.float32) for n in HPARAMS}
  return keys, hparams


def host_splits(cfg: ml_collections.ConfigDict, keys: jax.Array,
                hparams: dict) -> splits.Split:
  """The stacked numpy Split [R, T] of each run, computed on the host from its key (the value
  init_run's callback would compute; the results are cached by key and canonical frac_ood)."""
  split_keys = jax.vmap(lambda k: rng.stream(k, "split"))(keys)
  seed_data = np.asarray(jax.random.key_data(split_keys))
  fracs = np.asarray(hparams["frac_ood"])
  per_run = [splits.host_split(seed_data[r], fracs[r], strategy=cfg.task.support,
                               M=cfg.task.num_modules, K=cfg.task.max_hotness,
                               max_retries=cfg.task.max_retries) for r in range(len(fracs))]
  return jax.tree.map(lambda *a: np.stack(a), *per_run)


def precompute_splits(cfg: ml_collections.ConfigDict, grid: list[dict]) -> list[dict]:
  """Builds every run's split on the host now, so an impossible split fails before compiling.

  Returns the grid with each run's number of training and held-out tasks (`n_train`, `n_ood`:
  the x axis of the paper's scaling plots) added.
  """
  stacked = host_splits(cfg, *run_inputs(cfg, grid))
  return [{**run, "n_train": int(stacked.n_train[r]), "n_ood": int(stacked.n_ood[r])}
          for r, run in enumerate(grid)]


def validate(cfg: ml_collections.ConfigDict) -> None:
  """Every check that needs no compilation; raises ConfigError naming the field."""
  checks.integer("num_seeds", cfg.num_seeds, low=1)
  families.validate(cfg.task)
  # Tasks are uint32 bitmasks on the device (the host-side supports allow up to MAX_MODULES).
  checks.integer("task.num_modules", cfg.task.num_modules, 1, combinatorics.MAX_DEVICE_MODULES)
  for frac in sweep_values(cfg, "frac_ood"):
    supports.validate(cfg.task.support, cfg.task.num_modules, cfg.task.max_hotness, frac)
  encodings.validate(cfg.encoding)
  if (encodings.get(cfg.encoding.name).needs_context
      and families.get(cfg.task.family).context_dim(cfg.task) == 0):
    raise ConfigError("encoding.name", f"{cfg.encoding.name!r} is not defined for task family "
                      f"{cfg.task.family!r}")
  students.validate(cfg.student)
  validate_schedule(cfg.optim, cfg.train.num_steps)
  for lr in sweep_values(cfg, "learning_rate"):
    checks.positive("optim.learning_rate", lr)
  for wd in sweep_values(cfg, "weight_decay"):
    checks.number("optim.weight_decay", wd, low=0)
  validate_train(cfg.train)
  # Bad evals entries, and evaluators the task family cannot use, fail here: before config.json
  # exists, so the corrected command is not refused later as 'a different config'.
  evaluators.validate(cfg)
