"""Training many letter LMs in one program: runs (tasks x seeds) vmapped, steps in scan chunks.

A run is a key, its task's substitution tables, its training strings and a trainable mask
(all ones from scratch; the head or the top blocks when fine-tuning). The host loop only acts
between chunks: progress bar, metric rows, a non-finite check.
"""

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from compgen_jax import metric_writer, rng
from compgen_jax.letters import data
from compgen_jax.lm.model import Model, forward
from compgen_jax.types import Array, ConfigError, NonFiniteError, PyTree


class Runs(NamedTuple):
  """Per-run arrays, leading axis R."""
  key: Array          # typed keys: the run's data / step stream
  tables_RxPxV: Array
  num_tables_R: Array
  data_RxNxL: Array   # fixed training strings (N = 1 and unused when sampling fresh)
  mask: PyTree        # per-leaf 0/1 scalars per run: which params train


class TrainState(NamedTuple):
  params: PyTree
  opt_state: PyTree


def trainable_mask(params: PyTree, regime: str, num_layers: int) -> PyTree:
  """1.0 for trainable leaves: 'all', 'head' (output head only), or 'topN' (N top blocks,
  the final LayerNorm and the head)."""
  if regime == "all":
    return jax.tree.map(lambda _: jnp.float32(1), params)
  if regime == "head":
    trainable = {"head"}
  elif regime.startswith("top") and regime[3:].isdigit() and 1 <= int(regime[3:]) <= num_layers:
    top = int(regime[3:])
    trainable = {"head", "ln_final"} | {f"block_{i}" for i in range(num_layers - top, num_layers)}
  else:
    raise ConfigError("finetune.regimes", f"{regime!r} is not 'all', 'head' or 'top1'.."
                      f"'top{num_layers}'")
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


def lm_loss(model: Model, params: PyTree, inputs_BxL: Array, labels_BxL: Array,
            weight_BxL: Array):
  """Mean cross-entropy and token accuracy over the weighted positions."""
  logits = forward(model, params, inputs_BxL)
  ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels_BxL)
  correct = (jnp.argmax(logits, -1) == labels_BxL).astype(jnp.float32)
  norm = jnp.maximum(weight_BxL.sum(), 1.0)
  return (ce * weight_BxL).sum() / norm, (correct * weight_BxL).sum() / norm


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


def make_train_chunk(model: Model, cfg_data, batch_size: int, optimizer,
                     chunk_steps: int) -> Callable:
  """jit(vmap over runs (scan over `chunk_steps` steps)); donates the state."""

  def one_step(state: TrainState, run: Runs, step):
    example = training_batch(rng.step_key(run.key, step), run, cfg_data, batch_size)
    grad_fn = jax.value_and_grad(functools.partial(lm_loss, model), has_aux=True)
    (loss, acc), grads = grad_fn(state.params, *example)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    updates = jax.tree.map(lambda u, m: u * m, updates, run.mask)
    return TrainState(optax.apply_updates(state.params, updates), opt_state), (loss, acc)

  def run_chunk(state: TrainState, run: Runs, first_step):
    def body(s, i):
      return one_step(s, run, first_step + i)
    state, (loss_C, acc_C) = jax.lax.scan(body, state, jnp.arange(chunk_steps))
    return state, {"loss": loss_C.mean(), "last_loss": loss_C[-1], "token_acc": acc_C[-1]}

  return jax.jit(jax.vmap(run_chunk, in_axes=(0, 0, None)), donate_argnums=0)


def make_runs(keys_R: Array, tasks: list[str], cfg_data, masks: PyTree) -> Runs:
  """Runs for `tasks` (one per entry, keys aligned), with their training strings."""
  tabs = [data.task_tables(t) for t in tasks]
  width = max(t.shape[0] for t in tabs)
  tables = np.stack([np.concatenate([t, np.repeat(t[:1], width - len(t), 0)]) for t in tabs])
  num_data = max(cfg_data.num_train, 1)
  strings = jax.vmap(lambda k: data.sample_inputs(rng.stream(k, "data"), num_data,
                                                  cfg_data.train_len))(keys_R)
  return Runs(keys_R, jnp.asarray(tables), jnp.asarray([len(t) for t in tabs], jnp.int32),
              strings, masks)


def train(model: Model, params_R: PyTree, runs: Runs, cfg_data, cfg_train, cfg_optim,
          run_info: list[dict], metrics_path: str, desc: str, progress: bool) -> PyTree:
  """Trains all runs for cfg_train.num_steps; writes one metric row per chunk and run."""
  num_steps = cfg_train.num_steps
  chunk = min(cfg_train.chunk_size, num_steps)
  if num_steps % chunk:
    raise ConfigError("train.chunk_size", f"{chunk} must divide num_steps={num_steps}")
  optimizer = make_optimizer(cfg_optim, num_steps)
  train_chunk = make_train_chunk(model, cfg_data, cfg_train.batch_size, optimizer, chunk)
  params_R = jax.tree.map(jnp.copy, params_R)  # the chunk donates its state, not the caller's
  state = TrainState(params_R, jax.vmap(optimizer.init)(params_R))
  bar = metric_writer.progress_bar(num_steps, desc=desc, disable=not progress)
  for first in range(0, num_steps, chunk):
    state, metrics = train_chunk(state, runs, first)
    metrics = jax.device_get(metrics)
    if not np.all(np.isfinite(metrics["loss"])):
      raise NonFiniteError(f"{desc}: non-finite loss before step {first + chunk}")
    rows = metric_writer.stacked_rows({k: v[None] for k, v in metrics.items()}, first + chunk,
                                      [dict(info, phase=desc) for info in run_info])
    metric_writer.append_rows(metrics_path, rows)
    bar.update(chunk)
    bar.set_postfix(loss=f"{float(np.mean(metrics['last_loss'])):.4f}")
  bar.close()
  return state.params
