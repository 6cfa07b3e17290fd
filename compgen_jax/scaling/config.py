"""The scaling experiment's config, which its config files start from (paper defaults,
hyperteacher task).

Config files in configs/ call `base_config()` and override what their preset changes; a task family
other than the hyperteacher replaces the `task` subtree.
"""

import copy

import ml_collections

from compgen_jax.encodings import registry as encodings
from compgen_jax.scaling import evaluators, probes
from compgen_jax.students import registry as students
from compgen_jax.tasks import hyperteacher
from compgen_jax.training.config import train_config


def base_config() -> ml_collections.ConfigDict:
  """seed, num_seeds, task, encoding, student, optim, train, evals, sweep and probe sections."""
  cfg = ml_collections.ConfigDict()
  cfg.seed = 0
  cfg.num_seeds = 3
  cfg.task = hyperteacher.default_config()
  cfg.encoding = encodings.default_config()
  cfg.student = students.default_config()  # name: mlp | transformer | hypernetwork
  cfg.optim = ml_collections.ConfigDict(dict(
      learning_rate=3e-4, weight_decay=3e-3, b1=0.9, b2=0.999, schedule="constant",
      warmup_steps=1000, end_factor=0.0))
  cfg.train = train_config()  # the engine's section (training/config.py)
  # The evaluators training runs, by name: every (steps; 0 = only the final step), num_tasks and
  # the evaluator's own settings; what an entry omits is evaluators.default_settings(name).
  cfg.evals = ml_collections.ConfigDict({"id": dict(every=5000, num_tasks=1024),
                                         "ood": dict(every=5000, num_tasks=1024)})
  cfg.sweep = ml_collections.ConfigDict(dict(frac_ood=(), learning_rate=(), weight_decay=()))
  cfg.probe = probes.default_config()  # ridge probes
  return cfg


def resolved(cfg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """The tree a run of `cfg` uses: every evaluator entry with its defaults filled in
  (evaluators.evals_config), what training and the passes read but config.json does not spell
  out."""
  out = copy.deepcopy(cfg)
  with out.unlocked():
    out.evals = evaluators.evals_config(cfg)
  return out
