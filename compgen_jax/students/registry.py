"""Student registry: name -> (init, apply, reads_tokens), validation and the `student` config."""

from collections.abc import Callable
from typing import NamedTuple

import jax
import ml_collections

from compgen_jax import checks
from compgen_jax.encodings.language import bag_of_counts
from compgen_jax.students import hypernetwork, mlp, transformer
from compgen_jax.types import ConfigError


class Student(NamedTuple):
  # init(key, enc_dim, x_dim, out_dim, cfg[, vocab_size]) -> params
  init: Callable
  # apply(params, phi_BxE, x_BxNxI, out_dim, cfg) -> (y_BxNxO, {layer: activations_BxNxD})
  apply: Callable
  # True: reads a sequence encoding's token ids itself (init takes vocab_size); False: reads it
  # as a bag of token counts [B, V-1].
  reads_tokens: bool = False


def _at_least_one(cfg: ml_collections.ConfigDict, names: tuple[str, ...]) -> None:
  for name in names:
    checks.integer(f"student.{name}", cfg[name], low=1)


def _validate_mlp(cfg: ml_collections.ConfigDict) -> None:
  for name in ("width", "depth"):
    if int(cfg[name]) < 1:
      raise ConfigError(f"student.{name}", f"must be >= 1, got {cfg[name]}")
  if any(int(w) < 1 for w in cfg.get("widths", ())):
    raise ConfigError("student.widths", f"every width must be >= 1, got {cfg.widths}")


def _validate_transformer(cfg: ml_collections.ConfigDict) -> None:
  _at_least_one(cfg, ("num_layers", "d_model", "num_heads", "ffw_dim"))
  if cfg.d_model % cfg.num_heads:
    raise ConfigError("student.d_model", f"must be a multiple of student.num_heads "
                      f"({cfg.num_heads}), got {cfg.d_model}")
  if (cfg.d_model // cfg.num_heads) % 2:
    raise ConfigError("student.d_model", f"head dim d_model / num_heads = "
                      f"{cfg.d_model // cfg.num_heads} must be even (RoPE rotates pairs)")
  if not cfg.rope_base > 0:
    raise ConfigError("student.rope_base", f"must be > 0, got {cfg.rope_base!r}")


def _validate_hypernetwork(cfg: ml_collections.ConfigDict) -> None:
  _at_least_one(cfg, ("hyper_hidden",))
  if not isinstance(cfg.hyper_layernorm, bool):
    raise ConfigError("student.hyper_layernorm", f"must be a bool, got {cfg.hyper_layernorm!r}")


REGISTRY: dict[str, Student] = {
    "mlp": Student(mlp.init, mlp.apply),
    "transformer": Student(transformer.init, transformer.apply, reads_tokens=True),
    "hypernetwork": Student(hypernetwork.init, hypernetwork.apply),
}
VALIDATORS: dict[str, Callable] = {"mlp": _validate_mlp, "transformer": _validate_transformer,
                                   "hypernetwork": _validate_hypernetwork}


def get(name: str) -> Student:
  if name not in REGISTRY:
    raise ConfigError("student.name", f"unknown {name!r}; allowed: {', '.join(REGISTRY)}")
  return REGISTRY[name]


def validate(cfg: ml_collections.ConfigDict) -> None:
  get(cfg.name)
  VALIDATORS[cfg.name](cfg)


def default_config() -> ml_collections.ConfigDict:
  """The `student` subtree: `name` picks the student; each reads only its own fields."""
  return ml_collections.ConfigDict(dict(
      name="mlp",
      width=1024, depth=4, widths=(),  # mlp (widths, when set, overrides depth x width)
      num_layers=4, d_model=256, num_heads=4, ffw_dim=1024, rope_base=10_000.0,  # transformer
      hyper_hidden=1024,  # hypernetwork: hidden width of the generated MLP (reference: d_ffw)
      hyper_layernorm=True,  # hypernetwork: LayerNorm phi(z) first (the paper's; scale-invariant)
  ))


def init_params(cfg: ml_collections.ConfigDict, key: jax.Array, enc_dim: int, x_dim: int,
                out_dim: int, vocab_size: int = 0) -> dict:
  """Parameters of student cfg.name; vocab_size > 0: the encoding is enc_dim token ids."""
  student = get(cfg.name)
  if vocab_size and student.reads_tokens:
    return student.init(key, enc_dim, x_dim, out_dim, cfg, vocab_size=vocab_size)
  if vocab_size:
    enc_dim = vocab_size - 1  # bag of counts of the non-PAD tokens
  return student.init(key, enc_dim, x_dim, out_dim, cfg)


def apply_student(cfg: ml_collections.ConfigDict, params: dict, phi: jax.Array,
                  x_BxNxI: jax.Array, out_dim: int, vocab_size: int = 0):
  """(predictions, activations) of student cfg.name; a sequence phi (vocab_size > 0) goes in
  as token ids or as a bag of counts, as the student reads it."""
  student = get(cfg.name)
  if vocab_size and not student.reads_tokens:
    phi = bag_of_counts(phi, vocab_size)
  return student.apply(params, phi, x_BxNxI, out_dim, cfg)
