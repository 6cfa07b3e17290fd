"""Task-family registry: name -> the functions the training loop needs."""

from collections.abc import Callable
from typing import NamedTuple

import ml_collections

from compgen_jax import checks
from compgen_jax.tasks import hyperteacher, losses, preference
from compgen_jax.types import ConfigError


class TaskFamily(NamedTuple):
  init: Callable          # init(key, task_cfg) -> teacher params
  sample_batch: Callable  # (params, khot_BxM, key, task_cfg, num_shots) -> Batch
  loss: Callable          # (pred, batch) -> (loss, {metric: scalar})
  x_dim: Callable         # task_cfg -> per-sample input size the student sees
  out_dim: Callable       # task_cfg -> prediction size
  context_dim: Callable   # task_cfg -> size of one few-shot context item (0: no few-shot)
  validate: Callable      # task_cfg -> None, raises ConfigError
  default_config: Callable
  # Its teacher has per-module weights theta that probes can decode (probe target "theta"), and
  # tasks of more than K modules are defined (the ood_hotness evaluator).
  module_weights: bool = False


REGISTRY: dict[str, TaskFamily] = {
    "hyperteacher": TaskFamily(
        init=hyperteacher.init, sample_batch=hyperteacher.sample_batch,
        loss=losses.regression_loss, x_dim=lambda c: c.input_dim, out_dim=lambda c: c.output_dim,
        context_dim=lambda c: c.input_dim + c.output_dim, validate=hyperteacher.validate,
        default_config=hyperteacher.default_config, module_weights=True),
    # context_dim 0: few-shot is not defined here; training/runs.py rejects it before compiling.
    "preference": TaskFamily(
        init=preference.init, sample_batch=preference.sample_batch,
        loss=losses.masked_classification_loss, x_dim=preference.x_dim,
        out_dim=preference.out_dim, context_dim=lambda c: 0, validate=preference.validate,
        default_config=preference.default_config),
}


def get(name: str) -> TaskFamily:
  checks.choice("task.family", name, REGISTRY)
  return REGISTRY[name]


def validate(cfg: ml_collections.ConfigDict) -> None:
  """The family's own checks, after making sure the `task` section has that family's fields."""
  family = get(cfg.family)
  missing = sorted(set(family.default_config().keys()) - set(cfg.keys()))
  if missing:
    raise ConfigError("task.family", f"{cfg.family!r} needs the task fields "
                      f"{', '.join(missing)}, which this config lacks; start from that family's "
                      f"config file (configs/{cfg.family}.py) instead of switching task.family")
  family.validate(cfg)
