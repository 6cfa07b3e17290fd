"""init_run (everything seed-dependent is created from one key) and the optimiser."""

import functools

import jax
import jax.numpy as jnp
import ml_collections
import optax

from compgen_jax import rng
from compgen_jax.encodings import registry as encodings
from compgen_jax.run_state import RunState, dims, vocab_size
from compgen_jax.students import registry as students
from compgen_jax.tasks import registry as families
from compgen_jax.tasks import splits
from compgen_jax.types import HPARAMS


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


def init_run(key: jax.Array, hparams: dict, cfg: ml_collections.ConfigDict,
             split: splits.Split | None = None) -> RunState:
  """Creates the teacher, split, encoding, student and optimiser state of one run.

  The split is a function of the key; pass it (splits.host_split of the key's data) to keep
  the host callback that computes it out of the compiled program.
  """
  family = families.get(cfg.task.family)
  enc = encodings.get(cfg.encoding.name)
  enc_dim, x_dim, out_dim, _ = dims(cfg)
  task = {
      "teacher": family.init(rng.stream(key, "teacher"), cfg.task),
      "encoding": enc.init(rng.stream(key, "encoding"), cfg.task.num_modules, cfg.encoding),
      "split": split if split is not None else splits.split(
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
