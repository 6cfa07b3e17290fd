"""The state of one run and the static facts derived from its config (below training/ and
evaluation/, which both read it)."""

from typing import Any

import flax.struct
import jax
import ml_collections

from compgen_jax.encodings import registry as encodings
from compgen_jax.tasks import registry as families


@flax.struct.dataclass
class RunState:
  step: jax.Array       # int32 [], steps completed
  key: jax.Array        # uint32 [2], the run key's data (raw, so orbax can store it)
  params: Any           # student parameters (trained)
  opt_state: Any
  task: Any             # {"teacher", "encoding", "split"}: fixed for the run
  hparams: Any          # {name: scalar} for HPARAMS


def run_key(state: RunState) -> jax.Array:
  return jax.random.wrap_key_data(state.key)


def dims(cfg: ml_collections.ConfigDict) -> tuple[int, int, int, int]:
  """(encoding dim, student x dim, output dim, few-shot context size) as static ints.

  For a sequence encoding the encoding dim is its length L (see vocab_size).
  """
  family = families.get(cfg.task.family)
  enc = encodings.get(cfg.encoding.name)
  ctx = family.context_dim(cfg.task)
  return (enc.dim(cfg.task.num_modules, cfg.encoding, ctx), family.x_dim(cfg.task),
          family.out_dim(cfg.task), ctx)


def vocab_size(cfg: ml_collections.ConfigDict) -> int:
  """V of a sequence encoding (its dims() entry is then the length L); 0 for vector encodings."""
  return encodings.vocab_size(cfg.encoding, cfg.task.num_modules)
