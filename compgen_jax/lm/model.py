"""The one adapter every autoregressive model sits behind, and models built from adapters.

A `Model` is pure functions over a params pytree plus its vocabulary, so composition and
decoding never see what is inside (a letter transformer, a uniform model, later a checkpoint):
  init_cache(batch, max_len) -> cache
  apply(params, tokens_BxL, cache, valid_BxL) -> (logits_BxLxV, cache)
With cache=None, apply is a teacher-forced causal pass over tokens_BxL (and returns None as the
cache); with a cache it appends the L tokens at the cache's position and returns the new cache.
valid_BxL marks real tokens: other positions are not attended to as keys (padding).
`positions_count` says what a token's position counts: "tokens" (the valid tokens before it,
or no positions at all: padding slots shift nothing) or "slots" (cache slots, padding
included). Decoding that leaves padding between tokens (speculative decoding) needs "tokens".
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from compgen_jax.types import Array, PRNGKey, PyTree

POSITIONS_COUNT = ("tokens", "slots")


class Model(NamedTuple):
  """An autoregressive model as pure functions; `init` is None for models without params."""
  apply: Callable[[PyTree, Array, Any, Array], tuple[Array, Any]]
  init_cache: Callable[[int, int], Any]
  vocab_size: int
  bos_id: int
  eos_id: int
  pad_id: int
  positions_count: str  # POSITIONS_COUNT: what a token's position counts
  init: Callable[[PRNGKey], PyTree] | None = None


def forward(model: Model, params: PyTree, tokens_BxT: Array,
            valid_BxT: Array | None = None) -> Array:
  """Teacher-forced logits [B, T, V] (every token valid unless `valid_BxT` says otherwise)."""
  valid_BxT = jnp.ones(tokens_BxT.shape, bool) if valid_BxT is None else valid_BxT
  return model.apply(params, tokens_BxT, None, valid_BxT)[0]


def lm_loss(model: Model, params: PyTree, inputs_BxL: Array, labels_BxL: Array,
            weight_BxL: Array) -> tuple[Array, Array]:
  """Mean cross-entropy and token accuracy over the weighted positions (the training loss of
  every LM here: letters' models, lm_train's Gemma-2)."""
  return loss_from_logits(forward(model, params, inputs_BxL), labels_BxL, weight_BxL)


def loss_from_logits(logits: Array, labels_BxL: Array, weight_BxL: Array) -> tuple[Array, Array]:
  """lm_loss of given logits [B, L, V] (a step that reads them for more than the loss)."""
  ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels_BxL)
  correct = (jnp.argmax(logits, -1) == labels_BxL).astype(jnp.float32)
  norm = jnp.maximum(weight_BxL.sum(), 1.0)
  return (ce * weight_BxL).sum() / norm, (correct * weight_BxL).sum() / norm


def prefill(model: Model, params: PyTree, tokens_BxT: Array, valid_BxT: Array, cache,
            chunk: int, *, all_logits: bool = False) -> tuple[Array, Any]:
  """Appends tokens_BxT to `cache` `chunk` tokens at a time (a scan over whole chunks, then the
  rest) with the adapter's apply: one compiled step, attention memory chunk x cache length
  instead of T x cache length. Returns the logits after the last token [B, V] (or, with
  `all_logits`, at every token [B, T, V]) and the cache."""
  batch, length = tokens_BxT.shape
  num_full, parts = length // chunk, []
  if num_full:
    split = lambda x: x[:, :num_full * chunk].reshape(batch, num_full, chunk).swapaxes(0, 1)

    def body(cache, xs):
      logits_BxLxV, cache = model.apply(params, xs[0], cache, xs[1])
      return cache, logits_BxLxV if all_logits else logits_BxLxV[:, -1:]

    cache, out_CxBxLxV = jax.lax.scan(body, cache, (split(tokens_BxT), split(valid_BxT)))
    parts.append(jnp.concatenate(list(out_CxBxLxV), axis=1) if all_logits
                 else out_CxBxLxV[-1])
  if length % chunk:
    rest = slice(num_full * chunk, length)
    logits_BxLxV, cache = model.apply(params, tokens_BxT[:, rest], cache, valid_BxT[:, rest])
    parts.append(logits_BxLxV if all_logits else logits_BxLxV[:, -1:])
  if all_logits:
    return jnp.concatenate(parts, axis=1), cache
  return parts[-1][:, 0], cache


def same_vocabulary(models) -> None:
  """ValueError unless every model has the same vocabulary and special ids (composition
  combines distributions over one vocabulary)."""
  vocab = {(m.vocab_size, m.bos_id, m.eos_id, m.pad_id) for m in models}
  if len(vocab) > 1:
    raise ValueError(f"models disagree on (vocab_size, bos, eos, pad): {sorted(vocab)}")


def full_forward_model(model: Model) -> Model:
  """The same model decoding without a KV cache: each call re-runs the full forward pass.

  The 'cache' is the token buffer so far; used to check the KV cache and to time it.
  """

  def init_cache(batch: int, max_len: int):
    return {"index": jnp.zeros((), jnp.int32), "tokens": jnp.zeros((batch, max_len), jnp.int32),
            "valid": jnp.zeros((batch, max_len), bool)}

  def apply(params, tokens_BxL, cache, valid_BxL):
    if cache is None:
      return model.apply(params, tokens_BxL, None, valid_BxL)
    index, length = cache["index"], tokens_BxL.shape[1]
    buf_BxT = jax.lax.dynamic_update_slice(cache["tokens"], tokens_BxL.astype(jnp.int32),
                                           (0, index))
    valid_BxT = jax.lax.dynamic_update_slice(cache["valid"], valid_BxL, (0, index))
    logits_BxTxV = forward(model, params, buf_BxT, valid_BxT)
    logits_BxLxV = jax.lax.dynamic_slice_in_dim(logits_BxTxV, index, length, axis=1)
    return logits_BxLxV, {"index": index + length, "tokens": buf_BxT, "valid": valid_BxT}

  return model._replace(init_cache=init_cache, apply=apply)


def uniform_model(like: Model) -> Model:
  """The uniform distribution over `like`'s vocabulary at every step (params: None)."""

  def apply(params, tokens_BxL, cache, valid_BxL):
    del params, valid_BxL
    # depends on the tokens so XLA does not constant-fold large arrays
    logits = (jnp.zeros(tokens_BxL.shape + (like.vocab_size,), jnp.float32)
              + 0.0 * tokens_BxL[..., None].astype(jnp.float32))
    return logits, cache

  return like._replace(apply=apply, init_cache=lambda batch, max_len: (), init=None,
                       positions_count="tokens")
