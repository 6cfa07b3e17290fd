"""RunState and init_run: everything seed-dependent is created from one key."""

import functools
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import ml_collections
import optax

from compgen_jax import rng
from compgen_jax.encodings import registry as encodings
from compgen_jax.students import registry as students
from compgen_jax.tasks import registry as families
from compgen_jax.tasks import supports

# Array-valued hyperparameters: one scalar per run, so sweeps over them are a vmapped axis.
HPARAMS = ("frac_ood", "learning_rate", "weight_decay")


@flax.struct.dataclass
class RunState:
  step: jax.Array       # int32 [], steps completed
  key: jax.Array        # uint32 [2], the run key's data (raw, so orbax can store it)
  params: Any           # student parameters (trained)
  opt_state: Any
  task: Any             # {"teacher", "encoding", "split"}: fixed for the run
  hparams: Any          # {name: scalar} for HPARAMS


def cache_by_config(make):
  """Memoises a builder of jitted functions `make(cfg, *args)` by the config's contents.

  Jitted closures are new objects on every build; reusing them lets a process that trains,
  resumes or evaluates the same config several times compile once.
  """
  memo = {}

  @functools.wraps(make)
  def cached(cfg: ml_collections.ConfigDict, *args):
    key = (make.__module__, make.__qualname__, cfg.to_json_best_effort(sort_keys=True), args)
    if key not in memo:
      memo[key] = make(cfg, *args)
    return memo[key]

  cached.cache_clear = memo.clear
  return cached


def run_key(state: RunState) -> jax.Array:
  return jax.random.wrap_key_data(state.key)


def optimizer(cfg: ml_collections.ConfigDict) -> optax.GradientTransformation:
  """AdamW with decay on matrices only; lr / wd injected so they can differ per run and step."""
  def decay_mask(params):
    return jax.tree.map(lambda p: p.ndim > 1, params)
  # `mask` is static: inject_hyperparams treats any callable argument as a schedule of the step
  # count, which would turn the mask into `False` and switch weight decay off everywhere.
  return optax.inject_hyperparams(optax.adamw, static_args=("mask",))(
      learning_rate=cfg.learning_rate, weight_decay=cfg.weight_decay, b1=cfg.b1, b2=cfg.b2,
      mask=decay_mask)


def lr_factor(step: jax.Array, cfg: ml_collections.ConfigDict, num_steps: int) -> jax.Array:
  """Multiplier of the base learning rate at `step` (constant or warmup-cosine)."""
  if cfg.schedule == "constant":
    return jnp.ones((), jnp.float32)
  sched = optax.warmup_cosine_decay_schedule(
      0.0, 1.0, warmup_steps=cfg.warmup_steps, decay_steps=num_steps, end_value=cfg.end_factor)
  return sched(step)


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


def init_run(key: jax.Array, hparams: dict, cfg: ml_collections.ConfigDict) -> RunState:
  """Creates the teacher, split, encoding, student and optimiser state of one run."""
  family = families.get(cfg.task.family)
  enc = encodings.get(cfg.encoding.name)
  enc_dim, x_dim, out_dim, _ = dims(cfg)
  task = {
      "teacher": family.init(rng.stream(key, "teacher"), cfg.task),
      "encoding": enc.init(rng.stream(key, "encoding"), cfg.task.num_modules, cfg.encoding),
      "split": supports.split(
          rng.stream(key, "split"), hparams["frac_ood"], strategy=cfg.task.support,
          M=cfg.task.num_modules, K=cfg.task.max_hotness, max_retries=cfg.task.max_retries),
  }
  params = students.init_params(cfg.student, rng.stream(key, "student"), enc_dim, x_dim, out_dim,
                                vocab_size(cfg))
  hparams = {k: jnp.asarray(hparams[k], jnp.float32) for k in HPARAMS}
  opt_state = optimizer(cfg.optim).init(params)
  opt_state.hyperparams["learning_rate"] = hparams["learning_rate"]
  opt_state.hyperparams["weight_decay"] = hparams["weight_decay"]
  return RunState(step=jnp.zeros((), jnp.int32), key=jax.random.key_data(key), params=params,
                  opt_state=opt_state, task=task, hparams=hparams)
