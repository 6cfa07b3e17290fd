"""The `train` config section every family shares, and its one validation."""

import ml_collections

from compgen_jax import checks, metric_writer
from compgen_jax.types import ConfigError


def train_config(**overrides) -> ml_collections.ConfigDict:
  """The `train` section (the paper's hyperteacher defaults), with `overrides`."""
  return ml_collections.ConfigDict(dict(dict(
      num_steps=100_000, batch_size=128, chunk_size=500, log_every=100,
      checkpoint_every=10_000, max_checkpoints=3, progress=True,
      writers=("jsonl",)), **overrides))  # metric sinks; "tensorboard": WORKDIR/tensorboard


def validate_train(train: ml_collections.ConfigDict) -> None:
  """The loop's settings: positive sizes, a log window dividing the chunk, checkpoints and the
  end at chunk boundaries, known writers with jsonl. ConfigError naming the field."""
  for name in ("num_steps", "batch_size", "chunk_size", "checkpoint_every", "log_every"):
    checks.positive(f"train.{name}", train[name])
  if train.chunk_size % train.log_every:
    raise ConfigError("train.log_every", f"must divide train.chunk_size "
                      f"({train.chunk_size}), got {train.log_every}")
  metric_writer.validate_writers(train.writers)
  for name in ("checkpoint_every", "num_steps"):
    if train[name] % train.chunk_size:
      raise ConfigError(f"train.{name}", f"must be a multiple of train.chunk_size "
                        f"({train.chunk_size}), got {train[name]}")
  checks.integer("train.max_checkpoints", train.max_checkpoints, low=1)
