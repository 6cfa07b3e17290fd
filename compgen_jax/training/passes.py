"""What every family's standalone passes over saved checkpoints share: select_steps picks the
checkpoints (the latest, one, or every), write_pass replaces each step's rows as soon as they are
computed, so a re-run over a step leaves one copy of its rows."""

from compgen_jax import checkpointing, metric_writer
from compgen_jax.training import sharding
from compgen_jax.types import CheckpointError, ConfigError


def select_steps(checkpoints: str, step: int | None, every: bool) -> list[int]:
  """Steps of the checkpoint directory `checkpoints` to process: all (every), the given one, or
  the latest (every family's passes)."""
  if every and step is not None:
    raise ConfigError("step", "give either a step or every, not both")
  available = checkpointing.available_steps(checkpoints)
  if not available:
    raise CheckpointError(f"no checkpoint found in {checkpoints!r}")
  if every:
    return available
  if step is None:
    return [available[-1]]
  if step not in available:
    raise CheckpointError(f"no checkpoint for step {step} in {checkpoints!r}; "
                          f"available: {available}")
  return [step]


def write_pass(path: str, steps: list[int], rows_of_step) -> list[dict]:
  """Each step's rows from `rows_of_step(step)`, replacing that step's rows in the jsonl file
  `path` as soon as they are computed (a later step failing keeps them; a re-run leaves one copy
  of each row). Returns every step's rows."""
  out = []
  for step in steps:
    rows = rows_of_step(step)
    if sharding.is_main_process():
      metric_writer.replace_step_rows(path, step, rows)
    out.extend(rows)
  return out
