"""The state of one run of the scaling experiment (teacher, split, encoding, student and
optimiser, all created from one key by init_run) and the static facts derived from its config."""

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import ml_collections

from compgen_jax import rng
from compgen_jax.encodings import registry as encodings
from compgen_jax.students import registry as students
from compgen_jax.tasks import registry as families
from compgen_jax.tasks import splits
from compgen_jax.training.optim import optimizer

# Array-valued hyperparameters: one scalar per run, so sweeps over them are a vmapped axis (the
# RunState's hparams; fields of every metrics row).
HPARAMS = ("frac_ood", "learning_rate", "weight_decay")


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


def init_run(key: jax.Array, hparams: dict, cfg: ml_collections.ConfigDict,
             split: splits.Split) -> RunState:
  """Creates the teacher, encoding, student and optimiser state of one run, with its split.

  The split is a function of the key, computed on the host (runs.host_splits: the key's `split`
  stream), so the compiled program holds no host callback.
  """
  family = families.get(cfg.task.family)
  enc = encodings.get(cfg.encoding.name)
  enc_dim, x_dim, out_dim, _ = dims(cfg)
  task = {
      "teacher": family.init(rng.stream(key, "teacher"), cfg.task),
      "encoding": enc.init(rng.stream(key, "encoding"), cfg.task.num_modules, cfg.encoding),
      "split": split,
  }
  params = students.init_params(cfg.student, rng.stream(key, "student"), enc_dim, x_dim, out_dim,
                                vocab_size(cfg))
  hparams = {k: jnp.asarray(hparams[k], jnp.float32) for k in HPARAMS}
  opt_state = optimizer(cfg.optim).init(params)
  opt_state.hyperparams["learning_rate"] = hparams["learning_rate"]
  opt_state.hyperparams["weight_decay"] = hparams["weight_decay"]
  return RunState(step=jnp.zeros((), jnp.int32), key=jax.random.key_data(key), params=params,
                  opt_state=opt_state, task=task, hparams=hparams)
