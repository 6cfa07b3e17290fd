"""The trained models an experiment run reads, trained in one program or restored.

All from-scratch models (tasks x seeds) train in one vmapped program, the 'scratch' phase. With
`init=independent` (the authors' code) every task of a seed draws its own initial parameters;
with `init=shared` they all start from one draw per seed, which weight averaging and task
arithmetic need. The fine-tuned experts (for the task-arithmetic check; the 'finetune' phase)
start from each seed's identity model. Each phase trains through the one loop in
<workdir>/<phase>/ (letters.training). `restore_zoo` (experiments/evaluate.py: standalone.py)
only restores, against the layout the workdir trained.
"""

import functools
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp

from compgen_jax import rng
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


def _split(params_R: PyTree, names: list, num_seeds: int) -> dict:
  """Task-major [len(names) * S, ...] -> {name: [S, ...]}."""
  # jitted, as every step before training here: op by op, each slice shape and each primitive
  # of the model's init compiles on its own (~200 compiles, a third of a tiny run's time)
  return dict(zip(names, _jit_split(params_R, len(names), num_seeds), strict=True))


def _split_list(params_R: PyTree, num_names: int, num_seeds: int) -> list:
  """Task-major [num_names * S, ...] -> [[S, ...]] * num_names."""
  return [jax.tree.map(lambda a, i=i: a[i * num_seeds:(i + 1) * num_seeds], params_R)
          for i in range(num_names)]


_jit_split = jax.jit(_split_list, static_argnums=(1, 2))


def initial_params(model: Model, seed_keys_S: jax.Array, tasks: list[str], init: str) -> PyTree:
  """Task-major [len(tasks) * S, ...] initial parameters: one draw per seed ('shared', stream
  'student') or one per task and seed ('independent', stream 'init/<task>')."""
  return _jit_initial_params(model, seed_keys_S, tuple(tasks), init)


@functools.partial(jax.jit, static_argnums=(0, 2, 3))
def _jit_initial_params(model: Model, seed_keys_S: jax.Array, tasks: tuple, init: str) -> PyTree:
  if init == "shared":
    init_S = jax.vmap(lambda k: model.init(rng.stream(k, "student")))(seed_keys_S)
    return jax.tree.map(lambda a: jnp.concatenate([a] * len(tasks)), init_S)
  keys_R = jnp.concatenate([jax.vmap(lambda k, t=t: rng.stream(k, f"init/{t}"))(seed_keys_S)
                            for t in tasks])
  return jax.vmap(model.init)(keys_R)


def run_keys(cfg) -> jax.Array:
  """[S] typed keys of the seeds."""
  return jax.jit(jax.vmap(lambda i: rng.run_key(cfg.seed, i)))(jnp.arange(cfg.num_seeds))


def _phases(cfg, workdir: str, tasks: list[str], runs: list[tuple[str, str]], train: bool
            ) -> tuple[Model, jax.Array, dict, dict]:
  """(model, seed keys, params {task: [S, ...]}, fine-tuned {(expert, regime): [S, ...]}): the
  'scratch' phase (the models `tasks`, the first 'identity') and, for `runs`, the 'finetune'
  phase from each seed's identity model, each trained in <workdir>/<phase>/ through the one loop
  (resuming) or, `train` False, restored from its final checkpoint."""
  model, s = letter_lm(cfg.model, cfg.data.layout), cfg.num_seeds
  seed_keys = run_keys(cfg)

  def phase(name, init_R, stream, per_run, regimes, info, cfg_train, cfg_optim):
    def keys_and_masks(seed_keys, init_R):
      keys = jnp.concatenate([jax.vmap(lambda k, n=n: rng.stream(k, f"{stream}/{n}"))(seed_keys)
                              for n in per_run])
      masks = jax.tree.map(lambda *m: jnp.concatenate(m), *[
          jax.vmap(lambda p, r=r: training.trainable_mask(p, r, cfg.model.num_layers))(p_S)
          for p_S, r in zip(_split_list(init_R, len(regimes), s), regimes, strict=True)])
      return keys, masks

    keys, masks = jax.jit(keys_and_masks)(seed_keys, init_R)  # one program (see _split)
    phase_train = training.phase_train(cfg_train, cfg.train.progress)
    trainable = training.Phase(name, training.family(model, init_R, training.make_runs(
        keys, [n for n in per_run for _ in range(s)], cfg.data, masks), cfg.data, cfg_optim,
        phase_train, info), phase_train)
    if train:
      print(f"[{name}] {len(info) // s} model(s) x {s} seeds: "
            f"{', '.join(dict.fromkeys(str(i['task']) for i in info))}", flush=True)
    return training.train(trainable, cfg, os.path.join(workdir, name), train)

  init_R = initial_params(model, seed_keys, tasks, cfg.init)
  params = _split(phase(training.SCRATCH, init_R, "task", tasks, ["all"] * len(tasks),
                        [{"task": t, "seed": i} for t in tasks for i in range(s)],
                        cfg.train, cfg.optim), tasks, s)
  finetuned = {}
  if runs:
    ft_init = jax.jit(lambda p: jax.tree.map(lambda a: jnp.concatenate([a] * len(runs)), p))(
        params["identity"])
    finetuned = _split(phase(
        training.FINETUNE, ft_init, "finetune", [e for e, _ in runs], [r for _, r in runs],
        [{"task": e, "regime": r, "seed": i} for e, r in runs for i in range(s)],
        cfg.finetune.train, cfg.finetune.optim), runs, s)
  return model, seed_keys, params, finetuned


def restore_zoo(cfg, workdir: str, trained: tuple[list, list], tasks: list[str],
                runs: list[tuple[str, str]]) -> Zoo:
  """The models `tasks` and fine-tuned `runs`, restored (never trained) from a workdir whose
  phases trained the `trained` (tasks, runs) in that order; both must hold what is asked."""
  model, keys, params, finetuned = _phases(cfg, workdir, *trained, train=False)
  return Zoo(model, {t: params[t] for t in tasks}, {r: finetuned[r] for r in runs}, keys)


def build_zoo(cfg, workdir: str, tasks: list[str], runs: list[tuple[str, str]]) -> Zoo:
  """Trains (resuming, or restoring a finished phase) the models `tasks` from scratch (the
  first is 'identity') and fine-tunes the (expert, regime) `runs` from each seed's identity
  model."""
  model, keys, params, finetuned = _phases(cfg, workdir, tasks, runs, train=True)
  return Zoo(model, params, finetuned, keys)
