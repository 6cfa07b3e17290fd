"""Expert fine-tuning recipes: how far an expert may move from the background it starts at
(issue 55). Logit composition p_b * prod p_i / p_b is right when each expert equals the
background away from its skill; these are the levers that keep it close. Each is a field of
the `finetune` section, and every field off is the plain full fine-tune (the "drifted" end):

  replay    a fraction of each batch's rows drawn from the background's own corpus
            (finetune.replay_sources, each but its held_out_per_source documents: those stay
            unseen, to measure drift on), trained with the skill's rows
  kl        coefficient of the mean per-token KL(p_expert || p_background) over the replay
            rows' targets (the background is the run's frozen starting parameters): a penalty
            on drift where the text is not the skill's
  lora_rank low-rank adapters (Hu et al. 2021) on the attention and MLP projections: W + (alpha
            / r) A B with A [in, r], B [r, out]; only A and B train (B starts at zero, so the
            expert starts equal to the background); merged into W for export, so every loader
            reads a plain Gemma-2 checkpoint
  decay_to  "zero" (AdamW's decoupled decay) or "init" (the same decay toward the starting
            weights: -lr * wd * (w - w_0))
"""

import math

import jax
import jax.numpy as jnp
import ml_collections

from compgen_jax import checks
from compgen_jax.types import Array, ConfigError, PyTree

DECAY_TARGETS = ("zero", "init")
# The projections that take adapters, and how many leading axes (after the layer axis) of each
# are its input: q/k/v [N, D, heads, K], o [N, H, K, D], gate/up [N, D, F], down [N, F, D]
LORA_INPUT_AXES = {"q": 1, "k": 1, "v": 1, "o": 2, "gate": 1, "up": 1, "down": 1}


def default_config() -> ml_collections.ConfigDict:
  """The `finetune` section: every recipe off (a full fine-tune)."""
  return ml_collections.ConfigDict(dict(
      replay=0.0, replay_sources=("prose", "python"), held_out_per_source=200, kl=0.0,
      lora_rank=0, lora_alpha=16.0, lora_targets=tuple(LORA_INPUT_AXES), decay_to="zero"))


def validate(cfg: ml_collections.ConfigDict, replay_sources: tuple[str, ...]) -> None:
  """The finetune section of an lm_train config (ConfigError naming the field);
  `replay_sources`: the corpus sources replay may name."""
  f = cfg.finetune
  checks.number("finetune.replay", f.replay, 0, 1, high_open=True)
  checks.integer("finetune.held_out_per_source", f.held_out_per_source, low=1)
  checks.number("finetune.kl", f.kl, 0)
  checks.integer("finetune.lora_rank", f.lora_rank, low=0)
  checks.positive("finetune.lora_alpha", f.lora_alpha)
  checks.choices("finetune.lora_targets", f.lora_targets, LORA_INPUT_AXES)
  checks.choice("finetune.decay_to", f.decay_to, DECAY_TARGETS)
  if not uses_start(cfg):
    return
  if not cfg.init_from:
    raise ConfigError("init_from", "finetune's replay, kl, lora_rank and decay_to='init' refer "
                      "to the model fine-tuning starts at: name its export")
  if f.replay:
    if cfg.corpus.source != "llm_data":
      raise ConfigError("finetune.replay", "replays the background's llm_data corpus: needs "
                        f"corpus.source llm_data, got {cfg.corpus.source!r}")
    checks.choices("finetune.replay_sources", f.replay_sources, replay_sources)
    rows = replay_rows(cfg)
    if not 1 <= rows < cfg.train.batch_size:
      raise ConfigError("finetune.replay", f"{f.replay} of train.batch_size "
                        f"{cfg.train.batch_size} rows is {rows}: leave at least one row each "
                        "for the skill and for replay")
  if f.kl and not f.replay:
    raise ConfigError("finetune.kl", "is measured on the replay rows (off-skill text): set "
                      "finetune.replay > 0")
  if f.lora_rank and f.decay_to == "init":
    raise ConfigError("finetune.decay_to", "'init' with lora_rank: the adapters' decay toward "
                      "zero already decays toward the starting weights")


def uses_start(cfg: ml_collections.ConfigDict) -> bool:
  """Whether a run needs the starting parameters beside its own (as a constant)."""
  f = cfg.finetune
  return bool(f.replay or f.kl or f.lora_rank or f.decay_to == "init")


def replay_rows(cfg: ml_collections.ConfigDict) -> int:
  """Rows of each batch drawn from the replay corpus (the rest from the skill's)."""
  return round(cfg.finetune.replay * cfg.train.batch_size)


def _lora_dims(name: str, shape: tuple[int, ...]) -> tuple[int, int]:
  """(input, output) sizes of a layer-stacked projection viewed as a matrix."""
  split = 1 + LORA_INPUT_AXES[name]
  return math.prod(shape[1:split]), math.prod(shape[split:])


def init_lora(key: Array, shapes: PyTree, f: ml_collections.ConfigDict) -> PyTree:
  """Adapters of every target projection of a model with parameter `shapes` (arrays or
  ShapeDtypeStructs): {name: {"a": [N, in, r], "b": [N, r, out]}}, A drawn normal(0, 1 / in)
  (the variance of a fan-in init) and B zero, so the merged model is the start exactly."""
  out = {}
  keys = jax.random.split(key, len(f.lora_targets))
  for k, name in zip(keys, sorted(f.lora_targets), strict=True):
    w = shapes["layers"][name]
    fan_in, fan_out = _lora_dims(name, w.shape)
    out[name] = {"a": jax.random.normal(k, (w.shape[0], fan_in, f.lora_rank), w.dtype)
                 / math.sqrt(fan_in),
                 "b": jnp.zeros((w.shape[0], f.lora_rank, fan_out), w.dtype)}
  return out


def merge(start: PyTree, lora: PyTree, f: ml_collections.ConfigDict) -> PyTree:
  """The full parameters of adapters `lora` on `start`: W + (alpha / r) A B per target."""
  scale = f.lora_alpha / f.lora_rank
  layers = dict(start["layers"])
  for name, ab in lora.items():
    w = layers[name]
    delta = jnp.einsum("nir,nro->nio", ab["a"], ab["b"]).reshape(w.shape)
    layers[name] = w + scale * delta
  return {**start, "layers": layers}


def full_params(trained: PyTree, start: PyTree | None, f: ml_collections.ConfigDict) -> PyTree:
  """A run's model parameters: its adapters merged into `start` (lora_rank > 0), else its own."""
  return merge(start, trained, f) if f.lora_rank else trained


def decay_reference(params: PyTree, start: PyTree | None, f: ml_collections.ConfigDict) -> PyTree:
  """What AdamW's decoupled decay multiplies: the parameters (toward zero), or their distance
  from the start (decay_to='init'). AdamW reads its `params` argument for that term alone."""
  if f.decay_to == "init":
    return jax.tree.map(jnp.subtract, params, start)
  return params


def mean_kl(logits_BxLxV: Array, reference_BxLxV: Array, weight_BxL: Array) -> Array:
  """Mean over the weighted positions of KL(p || q), p = softmax(logits), q = softmax(reference)."""
  logp = jax.nn.log_softmax(logits_BxLxV, -1)
  logq = jax.nn.log_softmax(reference_BxLxV, -1)
  kl_BxL = jnp.sum(jnp.exp(logp) * (logp - logq), -1)
  return (kl_BxL * weight_BxL).sum() / jnp.maximum(weight_BxL.sum(), 1.0)
