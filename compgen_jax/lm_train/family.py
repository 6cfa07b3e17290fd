"""Gemma-2 language models as a family of the training engine (training.loop): one run's state,
its initialisation (fresh, or from given parameters: an expert fine-tuned from the background)
and its step (next-token cross-entropy under the loss mask, AdamW from training/optim.py with
its schedule, global-norm clipping; a fine-tune's recipe from recipes.py: replay, a KL penalty,
low-rank adapters, decay toward the start). Seeds are runs of one program, vmapped or mapped by
the engine; the packed data (and a fine-tune's starting parameters) are constants every run
shares, each run drawing its own batches."""

import functools
from typing import NamedTuple

import flax.struct
import jax
import jax.numpy as jnp
import ml_collections
import optax

from compgen_jax import rng
from compgen_jax.lm import gemma2
from compgen_jax.lm.model import forward as lm_forward
from compgen_jax.lm.model import loss_from_logits
from compgen_jax.lm_train import data, recipes
from compgen_jax.lm_train import model as model_lib
from compgen_jax.training import loop, optim
from compgen_jax.training.cache import cache_by_config
from compgen_jax.types import Array, PyTree


@flax.struct.dataclass
class LMState:
  step: Array       # int32 [], steps completed
  key: Array        # uint32 [2], the run key's data (orbax stores no typed keys)
  params: PyTree
  opt_state: PyTree  # the trained parameters': with lora_rank, the adapters


class Consts(NamedTuple):
  """What every step and evaluation reads, shared by the runs (one pytree constant)."""
  train: data.Packed
  held_out: data.Packed
  copying: tuple | None = None  # copying.score_masks of the held-out repeat documents
  replay: data.Packed | None = None  # the background's corpus rows (finetune.replay)
  start: PyTree | None = None  # the starting parameters (recipes.uses_start)


def optimizer(cfg: ml_collections.ConfigDict) -> optax.GradientTransformation:
  """AdamW over what a run trains: the model (decay on its matrices, not its norms), or its
  adapters (every one decayed: toward zero, so toward the start)."""
  if cfg.finetune.lora_rank:
    return optim.optimizer(cfg.optim)
  return optim.optimizer(cfg.optim, model_lib.decay_mask)


def clip(grads: PyTree, max_norm: float) -> PyTree:
  """`grads` scaled to global norm at most `max_norm` (0: unchanged): optax's global-norm clip,
  stateless, so the engine's optimiser state keeps its shape."""
  if max_norm == 0:
    return grads
  return optax.clip_by_global_norm(max_norm).update(grads, optax.EmptyState())[0]


def new_state(key: Array, params: PyTree, cfg: ml_collections.ConfigDict) -> LMState:
  return LMState(step=jnp.zeros((), jnp.int32), key=jax.random.key_data(key), params=params,
                 opt_state=optimizer(cfg).init(params))


def program_config(cfg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """What the compiled programs read (model, optim, the steps and batch size): a fine-tune,
  another corpus, more seeds or other checkpoint settings reuse the programs a process
  compiled already."""
  finetune = {k: v for k, v in cfg.finetune.to_dict().items() if k != "replay_sources"}
  return ml_collections.ConfigDict({
      "model": cfg.model.to_dict(), "optim": cfg.optim.to_dict(), "finetune": finetune,
      "train": {"num_steps": cfg.train.num_steps, "batch_size": cfg.train.batch_size}})


@cache_by_config
def init_fresh(cfg: ml_collections.ConfigDict):
  """key -> one run's state, its parameters the training init from the run's `init` stream
  (cfg: program_config)."""
  c = model_lib.gemma_config(cfg.model)
  return lambda key: new_state(
      key, model_lib.init_params(c, rng.stream(key, "init"), cfg.model.initializer_range), cfg)


@cache_by_config
def init_from(cfg: ml_collections.ConfigDict):
  """(key, params) -> one run's state starting at `params` exactly (fine-tuning; cfg:
  program_config)."""
  return functools.partial(new_state, cfg=cfg)


@cache_by_config
def init_lora(cfg: ml_collections.ConfigDict):
  """key -> one run's state training adapters (finetune.lora_rank; cfg: program_config), drawn
  from the run's `lora` stream; the model they adapt is the Consts' start."""
  shapes = gemma2.param_shapes(model_lib.gemma_config(cfg.model))
  return lambda key: new_state(
      key, recipes.init_lora(rng.stream(key, "lora"), shapes, cfg.finetune), cfg)


def model_params(state: LMState, c: Consts, cfg: ml_collections.ConfigDict) -> PyTree:
  """The run's model parameters (its adapters merged into the start, with lora_rank)."""
  return recipes.full_params(state.params, c.start, cfg.finetune)


def loss_of(c: gemma2.Gemma2Config, params: PyTree, tokens_BxL: Array, weight_BxL: Array):
  """(mean next-token cross-entropy over the weighted targets, token accuracy, their count)."""
  return _loss_and_logits(c, params, tokens_BxL, weight_BxL)[:2]


def _loss_and_logits(c: gemma2.Gemma2Config, params: PyTree, tokens_BxL: Array,
                     weight_BxL: Array):
  logits = lm_forward(gemma2.make_model(c), params, tokens_BxL[:, :-1])
  loss, acc = loss_from_logits(logits, tokens_BxL[:, 1:], weight_BxL[:, 1:])
  return loss, (acc, weight_BxL[:, 1:].sum()), logits


def draw(key: Array, c: Consts, cfg: ml_collections.ConfigDict) -> tuple[Array, Array]:
  """A step's batch: the skill's rows, then replay_rows of the replay corpus (its own stream)."""
  replay = recipes.replay_rows(cfg)
  skill = data.draw_batch(key, *c.train, cfg.train.batch_size - replay)
  if not replay:
    return skill
  more = data.draw_batch(rng.stream(key, "replay"), *c.replay, replay)
  return tuple(jnp.concatenate(pair) for pair in zip(skill, more, strict=True))


def objective(trained: PyTree, tokens_BxL: Array, weight_BxL: Array, c: Consts,
              cfg: ml_collections.ConfigDict):
  """The loss a step descends: cross-entropy over the batch's weighted targets, plus
  finetune.kl times the mean KL(p_run || p_start) over the replay rows' targets."""
  gc = model_lib.gemma_config(cfg.model)
  params = recipes.full_params(trained, c.start, cfg.finetune)
  loss, (acc, count), logits = _loss_and_logits(gc, params, tokens_BxL, weight_BxL)
  metrics = {"train/token_acc": acc, "train/targets": count}
  if cfg.finetune.kl:
    replay = recipes.replay_rows(cfg)
    tokens, weight = tokens_BxL[-replay:], weight_BxL[-replay:, 1:]
    reference = jax.lax.stop_gradient(lm_forward(gemma2.make_model(gc), c.start, tokens[:, :-1]))
    kl = recipes.mean_kl(logits[-replay:], reference, weight)
    metrics |= {"train/ce": loss, "train/kl": kl}
    loss = loss + cfg.finetune.kl * kl
  return loss, metrics


def train_step(state: LMState, c: Consts, *, cfg: ml_collections.ConfigDict):
  """One run's AdamW step on a batch of packed rows drawn from its `train` stream."""
  key = rng.step_key(rng.stream(jax.random.wrap_key_data(state.key), "train"), state.step)
  grad_fn = jax.value_and_grad(objective, has_aux=True)
  (loss, metrics), grads = grad_fn(state.params, *draw(key, c, cfg), c, cfg)
  grad_norm = optax.tree.norm(grads)
  grads = clip(grads, cfg.optim.grad_clip)
  opt_state = state.opt_state
  opt_state.hyperparams["learning_rate"] = cfg.optim.learning_rate * optim.lr_factor(
      state.step, cfg.optim, cfg.train.num_steps)
  updates, opt_state = optimizer(cfg).update(
      grads, opt_state, recipes.decay_reference(state.params, c.start, cfg.finetune))
  new = state.replace(step=state.step + 1, params=optax.apply_updates(state.params, updates),
                      opt_state=opt_state)
  return new, {"train/loss": loss, **metrics, "train/grad_norm": grad_norm,
               "train/lr": opt_state.hyperparams["learning_rate"]}


@cache_by_config
def step_one(cfg: ml_collections.ConfigDict):
  """(state, *data constants) -> (state, metrics): one object per program_config (compiled
  once)."""
  return functools.partial(train_step, cfg=cfg)


def held_out_loss(state: LMState, c: Consts, cfg: ml_collections.ConfigDict):
  """Cross-entropy over every weighted target of the held-out rows (summed over batches of
  train.batch_size rows, then divided by their count: each target weighs the same)."""
  gc = model_lib.gemma_config(cfg.model)
  params = model_params(state, c, cfg)
  eval_tokens_MxL, eval_weight_MxL = c.held_out
  b = cfg.train.batch_size
  pad = -eval_tokens_MxL.shape[0] % b
  tokens = jnp.pad(eval_tokens_MxL, ((0, pad), (0, 0))).reshape(-1, b, eval_tokens_MxL.shape[1])
  weight = jnp.pad(eval_weight_MxL, ((0, pad), (0, 0))).reshape(tokens.shape)

  def one(batch):
    loss, (acc, count) = loss_of(gc, params, *batch)
    return loss * count, acc * count, count

  loss_sum, acc_sum, count = jax.tree.map(jnp.sum, jax.lax.map(one, (tokens, weight)))
  norm = jnp.maximum(count, 1.0)
  return {"eval/loss": loss_sum / norm, "eval/token_acc": acc_sum / norm}


@cache_by_config
def evaluator(cfg: ml_collections.ConfigDict):
  return functools.partial(held_out_loss, cfg=cfg)


def copying_accuracy(state: LMState, c: Consts, cfg: ml_collections.ConfigDict):
  """In-context copying (lm_train/copying.py) of the run's parameters on the held-out repeat
  documents (c.copying: copying.score_masks): greedy next-token accuracy on the second copy and
  the first, each a mean over documents of the document's mean."""
  tokens_DxL, valid_DxL, first_DxL, second_DxL = c.copying
  model = gemma2.make_model(model_lib.gemma_config(cfg.model))
  logits_DxLxV = lm_forward(model, model_params(state, c, cfg), tokens_DxL, valid_DxL)
  right_DxL = (jnp.argmax(logits_DxLxV[:, :-1], -1) == tokens_DxL[:, 1:]).astype(jnp.float32)
  mean = lambda m: jnp.mean((right_DxL * m[:, :-1]).sum(1) / m.sum(1))  # noqa: E731
  return {"eval/copy_second": mean(second_DxL), "eval/copy_first": mean(first_DxL)}


@cache_by_config
def copying_evaluator(cfg: ml_collections.ConfigDict):
  return functools.partial(copying_accuracy, cfg=cfg)


def run_keys(cfg: ml_collections.ConfigDict) -> Array:
  """Seed s's key: rng.run_key(cfg.seed, s), as every family's."""
  return jnp.stack([rng.run_key(cfg.seed, s) for s in range(cfg.num_seeds)])


def family(cfg: ml_collections.ConfigDict, train: data.Packed, held_out: data.Packed,
           init_params: PyTree | None = None, copying: tuple | None = None,
           replay: data.Packed | None = None) -> loop.Family:
  """The seeds of `cfg` for the engine. `init_params`: None (the training init), or the
  parameters every run starts from (one pytree, or stacked [num_seeds, ...], one per run; one
  pytree where the finetune recipe reads the start: recipes.uses_start). `copying`:
  copying.score_masks of the held-out repeat documents, evaluated with the held-out loss when
  cfg.evals.copying; training stops early once every run's second-copy accuracy reaches
  cfg.evals.stop_copying (0: never). `replay`: the packed rows finetune.replay draws from."""
  keys = run_keys(cfg)
  grid = [{"run": s, "seed": s} for s in range(cfg.num_seeds)]
  program = program_config(cfg)
  start = None
  if recipes.uses_start(cfg):
    start = init_params
    shapes = gemma2.param_shapes(model_lib.gemma_config(cfg.model))
    if start is None or jax.tree.map(jnp.shape, start) != jax.tree.map(lambda s: s.shape, shapes):
      raise ValueError("the finetune recipe needs the one starting model's parameters")
    if (replay is None) != (recipes.replay_rows(cfg) == 0):
      raise ValueError("finetune.replay needs the replay rows, and only it")  # experiment.py
  if cfg.finetune.lora_rank:
    init_one, inputs = init_lora(program), (keys,)
  elif init_params is None:
    init_one, inputs = init_fresh(program), (keys,)
  else:
    shapes = gemma2.param_shapes(model_lib.gemma_config(cfg.model))
    stacked = all(a.ndim == s.ndim + 1 for a, s in zip(
        jax.tree.leaves(init_params), jax.tree.leaves(shapes), strict=True))
    params_R = init_params if stacked else jax.tree.map(
        lambda a: jnp.broadcast_to(a, (cfg.num_seeds, *a.shape)), init_params)
    init_one, inputs = init_from(program), (keys, params_R)
  every = cfg.evals.every
  evaluators = {"held_out": evaluator(program)}
  if cfg.evals.copying:
    if copying is None:
      raise ValueError("evals.copying needs the copying documents")  # experiment.py passes them
    evaluators["copying"] = copying_evaluator(program)
  threshold = cfg.evals.stop_copying
  return loop.Family(
      grid=grid, init_one=init_one, inputs=inputs, step=step_one(program),
      consts=lambda: (jax.tree.map(jnp.asarray, Consts(train, held_out, copying, replay, start)),),
      evaluators=evaluators,
      due=lambda step: tuple(evaluators) if step % every == 0 or step == cfg.train.num_steps
      else (),
      stops=(lambda ev: "eval/copy_second" in ev and bool(
          (ev["eval/copy_second"] >= threshold).all())) if threshold > 0 else None)
