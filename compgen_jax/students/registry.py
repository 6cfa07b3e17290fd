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
  # cfg below is the student's own subsection, student.<name>.
  # init(key, enc_dim, x_dim, out_dim, cfg[, vocab_size]) -> params
  init: Callable
  # apply(params, phi_BxE, x_BxNxI, out_dim, cfg) -> (y_BxNxO, {layer: activations_BxNxD})
  apply: Callable
  # True: reads a sequence encoding's token ids itself (init takes vocab_size); False: reads it
  # as a bag of token counts [B, V-1].
  reads_tokens: bool = False


def _validate_mlp(cfg: ml_collections.ConfigDict) -> None:
  for name in ("width", "depth"):
    checks.integer(f"student.mlp.{name}", cfg[name], low=1)
  if cfg.widths:  # empty: depth x width
    checks.integers("student.mlp.widths", cfg.widths, low=1)


def _validate_transformer(cfg: ml_collections.ConfigDict) -> None:
  for name in ("num_layers", "d_model", "num_heads", "ffw_dim"):
    checks.integer(f"student.transformer.{name}", cfg[name], low=1)
  if cfg.d_model % cfg.num_heads:
    raise ConfigError("student.transformer.d_model", f"must be a multiple of "
                      f"student.transformer.num_heads ({cfg.num_heads}), got {cfg.d_model}")
  if (cfg.d_model // cfg.num_heads) % 2:
    raise ConfigError("student.transformer.d_model", f"head dim d_model / num_heads = "
                      f"{cfg.d_model // cfg.num_heads} must be even (RoPE rotates pairs)")
  checks.positive("student.transformer.rope_base", cfg.rope_base)


def _validate_hypernetwork(cfg: ml_collections.ConfigDict) -> None:
  checks.integer("student.hypernetwork.hidden", cfg.hidden, low=1)
  checks.boolean("student.hypernetwork.layernorm", cfg.layernorm)


REGISTRY: dict[str, Student] = {
    "mlp": Student(mlp.init, mlp.apply),
    "transformer": Student(transformer.init, transformer.apply, reads_tokens=True),
    "hypernetwork": Student(hypernetwork.init, hypernetwork.apply),
}
# name -> check of its subsection student.<name> (ConfigError naming the field)
VALIDATORS: dict[str, Callable] = {"mlp": _validate_mlp, "transformer": _validate_transformer,
                                   "hypernetwork": _validate_hypernetwork}


def get(name: str) -> Student:
  checks.choice("student.name", name, REGISTRY)
  return REGISTRY[name]


def validate(cfg: ml_collections.ConfigDict) -> None:
  """The `student` section: a known name, and that student's own subsection."""
  get(cfg.name)
  VALIDATORS[cfg.name](cfg[cfg.name])


def default_config() -> ml_collections.ConfigDict:
  """The `student` section: `name` picks the student, which reads only its own subsection
  (--config.student.mlp.width=256)."""
  return ml_collections.ConfigDict(dict(
      name="mlp",
      mlp=dict(width=1024, depth=4, widths=()),  # widths, when set, overrides depth x width
      transformer=dict(num_layers=4, d_model=256, num_heads=4, ffw_dim=1024, rope_base=10_000.0),
      # hidden: width of the generated MLP (reference: d_ffw); layernorm: LayerNorm phi(z) first
      # (the paper's; scale-invariant)
      hypernetwork=dict(hidden=1024, layernorm=True),
  ))


def init_params(cfg: ml_collections.ConfigDict, key: jax.Array, enc_dim: int, x_dim: int,
                out_dim: int, vocab_size: int = 0) -> dict:
  """Parameters of student cfg.name (cfg: the `student` section; the student gets its own
  subsection); vocab_size > 0: the encoding is enc_dim token ids."""
  student, own = get(cfg.name), cfg[cfg.name]
  if vocab_size and student.reads_tokens:
    return student.init(key, enc_dim, x_dim, out_dim, own, vocab_size=vocab_size)
  if vocab_size:
    enc_dim = vocab_size - 1  # bag of counts of the non-PAD tokens
  return student.init(key, enc_dim, x_dim, out_dim, own)


def apply_student(cfg: ml_collections.ConfigDict, params: dict, phi: jax.Array,
                  x_BxNxI: jax.Array, out_dim: int, vocab_size: int = 0):
  """(predictions, activations) of student cfg.name (cfg: the `student` section); a sequence phi
  (vocab_size > 0) goes in as token ids or as a bag of counts, as the student reads it."""
  student = get(cfg.name)
  if vocab_size and not student.reads_tokens:
    phi = bag_of_counts(phi, vocab_size)
  return student.apply(params, phi, x_BxNxI, out_dim, cfg[cfg.name])
