"""The six task encodings phi(z) by name, and the `encoding` config subtree."""

from collections.abc import Callable
from typing import NamedTuple

import ml_collections

from compgen_jax.encodings import few_shot, interval_shuffle, invertible, linear, tokens
from compgen_jax.types import ConfigError


class Encoding(NamedTuple):
  """init(key, M, cfg) -> params; apply(params, z_BxM, context_BxCxF | None) -> phi_BxE float32;
  dim(M, cfg, context_dim) -> E (static); needs_context: the task family must supply context."""

  init: Callable
  apply: Callable
  dim: Callable
  needs_context: bool


REGISTRY: dict[str, Encoding] = {
    "identity": Encoding(linear.identity_init, linear.identity_apply, linear.square_dim, False),
    "orthogonal": Encoding(
        linear.orthogonal_init, linear.orthogonal_apply, linear.square_dim, False),
    "tokens": Encoding(tokens.tokens_init, tokens.tokens_apply, tokens.tokens_dim, False),
    "invertible": Encoding(
        invertible.invertible_init, invertible.invertible_apply, linear.square_dim, False),
    "interval_shuffle": Encoding(
        interval_shuffle.interval_shuffle_init, interval_shuffle.interval_shuffle_apply,
        linear.square_dim, False),
    "few_shot": Encoding(
        few_shot.few_shot_init, few_shot.few_shot_apply, few_shot.few_shot_dim, True),
}


def get(name: str) -> Encoding:
  """The encoding called `name`; ConfigError('encoding.name') if there is none."""
  if name not in REGISTRY:
    raise ConfigError(
        "encoding.name", f"unknown encoding {name!r}; allowed: {', '.join(REGISTRY)}")
  return REGISTRY[name]


def default_config() -> ml_collections.ConfigDict:
  """The `encoding` config subtree with the reference defaults."""
  cfg = ml_collections.ConfigDict()
  cfg.name = "identity"
  cfg.num_shots = 50  # few_shot: (x, y) pairs per task.
  cfg.num_bins = 10  # interval_shuffle: bins of width 1 / num_bins.
  # interval_shuffle: False remaps zeros (inactive modules) too, as the reference does.
  cfg.keep_zeros = False
  cfg.inn_layers = 3  # invertible: affine coupling layers.
  cfg.inn_hidden_mult = 2  # invertible: coupling MLP width = inn_hidden_mult * M.
  cfg.inn_init_scale = 0.1  # invertible: weights are N(0, 1) * inn_init_scale.
  return cfg


def validate(cfg: ml_collections.ConfigDict) -> None:
  """Raise ConfigError naming the first impossible field of the `encoding` subtree."""
  get(cfg.name)
  for field in ("num_shots", "num_bins", "inn_layers", "inn_hidden_mult"):
    value = cfg[field]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
      raise ConfigError(f"encoding.{field}", f"must be an integer >= 1, got {value!r}")
  if not isinstance(cfg.keep_zeros, bool):
    raise ConfigError("encoding.keep_zeros", f"must be a bool, got {cfg.keep_zeros!r}")
  if not cfg.inn_init_scale > 0:
    raise ConfigError("encoding.inn_init_scale", f"must be > 0, got {cfg.inn_init_scale!r}")
