"""The trained models an experiment run reads, trained in one program or restored.

All from-scratch models (tasks x seeds) train in one vmapped program. With `init=independent`
(the authors' code) every task of a seed draws its own initial parameters; with `init=shared`
they all start from one draw per seed, which weight averaging and task arithmetic need. The
fine-tuned experts (for the task-arithmetic check) start from each seed's identity model.
`restore_zoo` (compose.py --evaluate_only) only restores, against the layout the workdir trained.
"""

import os
from typing import NamedTuple

import jax
import jax.numpy as jnp

from compgen_jax import checkpointing, rng
from compgen_jax import workdir as workdir_lib
from compgen_jax.letters import data, training
from compgen_jax.lm.model import Model
from compgen_jax.lm.transformer import make_lm
from compgen_jax.types import PyTree


def letter_lm(cfg_model, layout: str = "aligned") -> Model:
  """The letter transformer of config section `model`, over the vocabulary of `layout` (the
  27 symbols for 'position': its special ids are outside it, never fed nor predicted)."""
  return make_lm(cfg_model, data.vocab_size(layout), bos_id=data.BOS, eos_id=data.EOS,
                 pad_id=data.PAD)


class Zoo(NamedTuple):
  model: Model
  params: dict            # task name -> params stacked over seeds [S, ...]
  finetuned: dict         # (expert, regime) -> params [S, ...]
  seed_keys: jax.Array    # [S] typed keys


def restore_group(workdir: str, group: str, params_R: PyTree) -> PyTree:
  """The run-stacked params of checkpoint group 'scratch' or 'finetune', restored against the
  shapes of `params_R` (arrays or ShapeDtypeStructs); CheckpointError if missing or corrupt."""
  ckpt_dir = os.path.join(workdir, workdir_lib.CHECKPOINT_DIR, group)
  abstract = {"params": jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), params_R)}
  _, state = checkpointing.restore(ckpt_dir, abstract)
  print(f"[{group}] restored trained models from {ckpt_dir}")
  return state["params"]


def _train_or_restore(workdir: str, group: str, init_params_R: PyTree, train_fn) -> PyTree:
  ckpt_dir = os.path.join(workdir, workdir_lib.CHECKPOINT_DIR, group)
  if checkpointing.available_steps(ckpt_dir):
    return restore_group(workdir, group, init_params_R)
  params_R = train_fn()
  checkpointing.save(checkpointing.manager(ckpt_dir), 1, {"params": params_R})
  return params_R


def _split(params_R: PyTree, names: list, num_seeds: int) -> dict:
  """Task-major [len(names) * S, ...] -> {name: [S, ...]}."""
  return {n: jax.tree.map(lambda a, i=i: a[i * num_seeds:(i + 1) * num_seeds], params_R)
          for i, n in enumerate(names)}


def initial_params(model: Model, seed_keys_S: jax.Array, tasks: list[str], init: str) -> PyTree:
  """Task-major [len(tasks) * S, ...] initial parameters: one draw per seed ('shared', stream
  'student') or one per task and seed ('independent', stream 'init/<task>')."""
  if init == "shared":
    init_S = jax.vmap(lambda k: model.init(rng.stream(k, "student")))(seed_keys_S)
    return jax.tree.map(lambda a: jnp.concatenate([a] * len(tasks)), init_S)
  keys_R = jnp.concatenate([jax.vmap(lambda k, t=t: rng.stream(k, f"init/{t}"))(seed_keys_S)
                            for t in tasks])
  return jax.vmap(model.init)(keys_R)


def run_keys(cfg) -> jax.Array:
  """[S] typed keys of the seeds."""
  return jax.vmap(lambda i: rng.run_key(cfg.seed, i))(jnp.arange(cfg.num_seeds))


def restore_zoo(cfg, workdir: str, trained: tuple[list, list], tasks: list[str],
                runs: list[tuple[str, str]]) -> Zoo:
  """The models `tasks` and fine-tuned `runs`, restored (never trained) from a workdir whose
  checkpoints stack the `trained` (tasks, runs) in that order; both must hold what is asked."""
  model, keys, s = letter_lm(cfg.model, cfg.data.layout), run_keys(cfg), cfg.num_seeds
  trained_tasks, trained_runs = trained
  init_R = jax.eval_shape(lambda: initial_params(model, keys, trained_tasks, cfg.init))
  params = _split(restore_group(workdir, "scratch", init_R), trained_tasks, s)
  finetuned = {}
  if runs:  # fine-tuned from identity: the same shapes, stacked over the trained runs
    ft_R = jax.tree.map(lambda a: jax.ShapeDtypeStruct((len(trained_runs) * s, *a.shape[1:]),
                                                       a.dtype), init_R)
    finetuned = _split(restore_group(workdir, "finetune", ft_R), trained_runs, s)
  return Zoo(model, {t: params[t] for t in tasks}, {r: finetuned[r] for r in runs}, keys)


def build_zoo(cfg, workdir: str, tasks: list[str], runs: list[tuple[str, str]]) -> Zoo:
  """Trains (or restores from workdir/checkpoints) the models `tasks` from scratch (the first
  is 'identity') and fine-tunes the (expert, regime) `runs` from each seed's identity model."""
  model = letter_lm(cfg.model, cfg.data.layout)
  s = cfg.num_seeds
  seed_keys = run_keys(cfg)
  metrics_path = os.path.join(workdir, workdir_lib.METRICS_FILE)
  init_R = initial_params(model, seed_keys, tasks, cfg.init)

  def train_scratch():
    keys = jnp.concatenate([jax.vmap(lambda k, t=t: rng.stream(k, f"task/{t}"))(seed_keys)
                            for t in tasks])
    masks = jax.vmap(lambda p: training.trainable_mask(p, "all", cfg.model.num_layers))(init_R)
    info = [{"task": t, "seed": i} for t in tasks for i in range(s)]
    print(f"training {len(tasks)} models x {s} seeds from scratch: {', '.join(tasks)}")
    per_run = [t for t in tasks for _ in range(s)]
    return training.train(model, init_R, training.make_runs(keys, per_run, cfg.data, masks),
                          cfg.data, cfg.train, cfg.optim, info, metrics_path, "scratch",
                          cfg.train.progress)

  params = _split(_train_or_restore(workdir, "scratch", init_R, train_scratch), tasks, s)
  finetuned = {}
  if runs:
    ft_init = jax.tree.map(lambda a: jnp.concatenate([a] * len(runs)), params["identity"])

    def train_finetune():
      keys = jnp.concatenate([jax.vmap(lambda k, e=e: rng.stream(k, f"finetune/{e}"))(seed_keys)
                              for e, _ in runs])
      masks = jax.tree.map(lambda *m: jnp.concatenate(m), *[
          jax.vmap(lambda p, r=r: training.trainable_mask(p, r, cfg.model.num_layers))(
              params["identity"]) for _, r in runs])
      info = [{"task": e, "regime": r, "seed": i} for e, r in runs for i in range(s)]
      print(f"fine-tuning {len(runs)} (expert, regime) runs x {s} seeds from the identity model")
      per_run = [e for e, _ in runs for _ in range(s)]
      return training.train(model, ft_init, training.make_runs(keys, per_run, cfg.data, masks),
                            cfg.data, cfg.finetune.train, cfg.finetune.optim, info,
                            metrics_path, "finetune", cfg.train.progress)

    finetuned = _split(_train_or_restore(workdir, "finetune", ft_init, train_finetune), runs, s)
  return Zoo(model, params, finetuned, seed_keys)
