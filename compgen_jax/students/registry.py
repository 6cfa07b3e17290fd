"""Student registry: name -> (init, apply, validate)."""

from collections.abc import Callable
from typing import NamedTuple

import ml_collections

from compgen_jax.students import mlp
from compgen_jax.types import ConfigError


class Student(NamedTuple):
  # init(key, enc_dim, x_dim, out_dim, cfg) -> params
  init: Callable
  # apply(params, phi_BxE, x_BxNxI, out_dim, cfg) -> (y_BxNxO, {layer: activations_BxNxD})
  apply: Callable


def _validate_mlp(cfg: ml_collections.ConfigDict) -> None:
  for name in ("width", "depth"):
    if int(cfg[name]) < 1:
      raise ConfigError(f"student.{name}", f"must be >= 1, got {cfg[name]}")
  if any(int(w) < 1 for w in cfg.get("widths", ())):
    raise ConfigError("student.widths", f"every width must be >= 1, got {cfg.widths}")


REGISTRY: dict[str, Student] = {"mlp": Student(mlp.init, mlp.apply)}
VALIDATORS: dict[str, Callable] = {"mlp": _validate_mlp}


def get(name: str) -> Student:
  if name not in REGISTRY:
    raise ConfigError("student.name", f"unknown {name!r}; allowed: {', '.join(REGISTRY)}")
  return REGISTRY[name]


def validate(cfg: ml_collections.ConfigDict) -> None:
  get(cfg.name)
  VALIDATORS[cfg.name](cfg)
