"""Training many letter LMs in one program: runs (tasks x seeds) vmapped, steps in scan chunks,
through the engine (training.loop.run: vmap or map over runs, resume from the last chunk,
sharding over devices, NaN stop, metric rows).

A run is a key, its task's substitution tables, its training strings and a trainable mask
(all ones from scratch; the head or the top blocks when fine-tuning). A phase ('scratch',
'finetune') is one loop workdir: <workdir>/<phase>/ with config.json (the letters config, as
in <workdir>/), metrics.jsonl and checkpoints.
"""

import functools
import os
from collections.abc import Callable
from typing import NamedTuple

import flax.struct
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from compgen_jax import checkpointing, checks, rng
from compgen_jax import workdir as workdir_lib
from compgen_jax.letters import data
from compgen_jax.lm.model import Model, lm_loss
from compgen_jax.training import loop
from compgen_jax.training import passes as engine_passes
from compgen_jax.types import Array, ConfigError, PyTree

SCRATCH, FINETUNE = "scratch", "finetune"  # the phases, each a loop workdir <workdir>/<phase>/


class Runs(NamedTuple):
  """Per-run arrays, leading axis R."""
  key: Array          # the run's data / step stream: typed keys (raw key data in LetterState)
  tables_RxPxV: Array
  num_tables_R: Array
  data_RxNxL: Array   # fixed training strings (N = 1 and unused when sampling fresh)
  mask: PyTree        # per-leaf 0/1 scalars per run: which params train


def regimes(num_layers: int) -> tuple[str, ...]:
  """The fine-tuning regimes of a model of `num_layers` blocks: 'all', 'head', 'top1'..'topN'."""
  return ("all", "head", *(f"top{n}" for n in range(1, num_layers + 1)))


def trainable_mask(params: PyTree, regime: str, num_layers: int) -> PyTree:
  """1.0 for trainable leaves: 'all', 'head' (output head only), or 'topN' (N top blocks,
  the final LayerNorm and the head)."""
  checks.choice("finetune.regimes", regime, regimes(num_layers))
  if regime == "all":
    return jax.tree.map(lambda _: jnp.float32(1), params)
  trainable = {"head"}
  if regime != "head":
    top = int(regime[3:])
    trainable |= {"ln_final"} | {f"block_{i}" for i in range(num_layers - top, num_layers)}
  if "head" not in params:
    raise ConfigError("model.tie_head", "head-only fine-tuning needs an untied head")
  return {name: jax.tree.map(lambda _, on=name in trainable: jnp.float32(on), sub)
          for name, sub in params.items()}


def make_optimizer(cfg_optim, num_steps: int) -> optax.GradientTransformation:
  """AdamW after global-norm clipping (none for grad_clip 0); warmup, then cosine decay to
  end_factor x the peak (warmup_steps 0 and end_factor 1: a constant rate, as torch's AdamW)."""
  schedule = optax.warmup_cosine_decay_schedule(
      0.0, cfg_optim.learning_rate, min(cfg_optim.warmup_steps, num_steps - 1), num_steps,
      end_value=cfg_optim.learning_rate * cfg_optim.end_factor)
  if cfg_optim.warmup_steps == 0 and cfg_optim.end_factor == 1:
    schedule = cfg_optim.learning_rate
  adamw = optax.adamw(schedule, weight_decay=cfg_optim.weight_decay)
  if cfg_optim.grad_clip == 0:
    return adamw
  return optax.chain(optax.clip_by_global_norm(cfg_optim.grad_clip), adamw)


def lm_example(tokens_BxT: Array, target_BxT: Array, layout: str) -> tuple[Array, Array, Array]:
  """(model input, labels, 0/1 weights) of sequences: next-token for the shifted layouts,
  in place (output y_t at input position t) for 'position'."""
  if layout == "position":
    x_BxN, y_BxN, valid_BxN = data.position_io(tokens_BxT)
    return x_BxN, y_BxN, valid_BxN.astype(jnp.float32)
  return tokens_BxT[:, :-1], tokens_BxT[:, 1:], target_BxT[:, 1:].astype(jnp.float32)


def training_batch(key: Array, run: Runs, cfg_data, batch_size: int):
  """One batch (input, labels, weights; `lm_example`) of a run's task, drawn from `key`.

  With `train.batch_size` 1 and a fixed set, strings are drawn with replacement (the authors
  sweep their 2000 strings in order for 5 epochs)."""
  key_idx, key_fresh, key_table, key_len = jax.random.split(key, 4)
  if cfg_data.num_train > 0:
    idx_B = jax.random.randint(key_idx, (batch_size,), 0, run.data_RxNxL.shape[0])
    x_BxN = run.data_RxNxL[idx_B]
  else:
    x_BxN = data.sample_inputs(key_fresh, batch_size, cfg_data.train_len)
  which_B = jax.random.randint(key_table, (batch_size,), 0, run.num_tables_R)
  y_BxN = jnp.take_along_axis(run.tables_RxPxV[which_B], x_BxN, axis=1)
  len_B = jax.random.randint(key_len, (batch_size,), cfg_data.train_min_len,
                             cfg_data.train_len + 1)
  tokens, _, target = data.build(x_BxN, len_B, y_BxN, cfg_data.layout)
  return lm_example(tokens, target, cfg_data.layout)


@flax.struct.dataclass
class LetterState:
  """One run of a phase as the engine (training.loop.run) trains and checkpoints it."""
  step: Array       # int32 [], steps completed
  params: PyTree
  opt_state: PyTree
  run: Runs         # the run's data; its key as raw key data (orbax stores no typed keys)


def make_step(model: Model, cfg_data, batch_size: int, optimizer) -> Callable:
  """One run's training step: state -> (state, {"train/loss", "train/token_acc"}); the engine
  scans, lifts and jits it (training/chunk.py)."""

  def one_step(state: LetterState):
    run = state.run
    key = rng.step_key(jax.random.wrap_key_data(run.key), state.step)
    example = training_batch(key, run, cfg_data, batch_size)
    grad_fn = jax.value_and_grad(functools.partial(lm_loss, model), has_aux=True)
    (loss, acc), grads = grad_fn(state.params, *example)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    updates = jax.tree.map(lambda u, m: u * m, updates, run.mask)
    new = state.replace(step=state.step + 1, params=optax.apply_updates(state.params, updates),
                        opt_state=opt_state)
    return new, {"train/loss": loss, "train/token_acc": acc}

  return one_step


def make_runs(keys_R: Array, tasks: list[str], cfg_data, masks: PyTree) -> Runs:
  """Runs for `tasks` (one per entry, keys aligned), with their training strings."""
  tabs = [data.task_tables(t) for t in tasks]
  width = max(t.shape[0] for t in tabs)
  tables = np.stack([np.concatenate([t, np.repeat(t[:1], width - len(t), 0)]) for t in tabs])
  num_data = max(cfg_data.num_train, 1)
  strings = jax.jit(jax.vmap(lambda k: data.sample_inputs(rng.stream(k, "data"), num_data,
                                                          cfg_data.train_len)))(keys_R)
  return Runs(keys_R, jnp.asarray(tables), jnp.asarray([len(t) for t in tabs], jnp.int32),
              strings, masks)


def phase_train(cfg_train, progress: bool) -> ml_collections.ConfigDict:
  """The loop's train section of one phase, from the config's (cfg.train or cfg.finetune.train):
  one row and one checkpoint per chunk, so a killed phase resumes from its last chunk."""
  chunk = min(cfg_train.chunk_size, cfg_train.num_steps)
  return ml_collections.ConfigDict({
      "num_steps": cfg_train.num_steps, "batch_size": cfg_train.batch_size, "chunk_size": chunk,
      "log_every": chunk, "checkpoint_every": chunk, "max_checkpoints": 2, "writers": ("jsonl",),
      "progress": progress})


class Phase(NamedTuple):
  """One training phase as the loop runs it, in <workdir>/<name>/ (whose config.json is the
  letters config: the phase's models are fixed by it and the phase name)."""
  name: str
  family: loop.Family
  train: ml_collections.ConfigDict  # phase_train's section


def family(model: Model, params_R: PyTree, runs: Runs, cfg_data, cfg_optim,
           train: ml_collections.ConfigDict, grid: list[dict]) -> loop.Family:
  """One phase's runs (params_R their initial parameters) for the engine."""
  optimizer = make_optimizer(cfg_optim, train.num_steps)

  def init_one(params, run):
    return LetterState(step=jnp.zeros((), jnp.int32), params=params,
                       opt_state=optimizer.init(params), run=run)

  return loop.Family(grid=grid, init_one=init_one,
                     inputs=(params_R, runs._replace(key=jax.random.key_data(runs.key))),
                     step=make_step(model, cfg_data, train.batch_size, optimizer))


def train(phase: Phase, cfg, workdir: str, train: bool = True) -> PyTree:
  """The phase's trained parameters [R, ...]: trained in `workdir` through the one loop
  (resuming; a finished phase is only restored), or, `train` False, restored from its final
  checkpoint (CheckpointError if there is none)."""
  ckpt_dir = os.path.join(workdir, workdir_lib.CHECKPOINT_DIR)
  num_steps = phase.train.num_steps
  done = num_steps in checkpointing.available_steps(ckpt_dir)
  if train and not done:
    loop.run(phase.family, cfg, workdir, train=phase.train)
  # the final step, picked as every checkpoint pass picks one (CheckpointError naming the steps
  # there when the phase did not finish)
  step, = engine_passes.select_steps(ckpt_dir, num_steps, every=False)
  _, state = loop.restore(workdir, phase.family.init_one, phase.family.inputs, step)
  if not train or done:
    print(f"[{phase.name}] restored trained models from {ckpt_dir}", flush=True)
  return state.params
