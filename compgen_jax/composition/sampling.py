"""Picking the next token from composed log-probs: greedy, or sampled at a temperature after
top-k, top-p and min-p, each row from its own key (so a row samples the same tokens whatever
else is in its batch)."""

import jax
import jax.numpy as jnp

from compgen_jax.composition.rules import nucleus
from compgen_jax.composition.spec import NO_TRUNCATION, Truncation
from compgen_jax.types import Array, PRNGKey


def row_keys(key: PRNGKey, batch: int) -> Array:
  """[B] keys, row r's fold_in(key, r), for a single key; a [B] key array is returned as is."""
  if key.shape == (batch,):
    return key
  if key.shape != ():
    raise ValueError(f"key must be one key or {batch} keys (one per row), got shape {key.shape}")
  return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, jnp.arange(batch))


def truncate(logits_xV: Array, trunc: Truncation) -> Array:
  """-inf outside top-k (ties with the k-th all kept), then outside the top-p nucleus, then
  below min_p times the largest probability; each on what the previous one kept."""
  if trunc.top_k:
    kth_x1 = jax.lax.top_k(logits_xV, min(trunc.top_k, logits_xV.shape[-1]))[0][..., -1:]
    logits_xV = jnp.where(logits_xV >= kth_x1, logits_xV, -jnp.inf)
  if trunc.top_p < 1.0:
    logits_xV = jnp.where(nucleus(logits_xV, trunc.top_p), logits_xV, -jnp.inf)
  if trunc.min_p > 0.0:
    keep_xV = logits_xV >= jnp.max(logits_xV, axis=-1, keepdims=True) + jnp.log(trunc.min_p)
    logits_xV = jnp.where(keep_xV, logits_xV, -jnp.inf)
  return logits_xV


def sampled_logits(logp_xV: Array, temperature: float | Array = 1.0,
                   trunc: Truncation = NO_TRUNCATION) -> Array:
  """The unnormalised log-probs `pick` samples from: at the temperature, then truncated."""
  return truncate(logp_xV / temperature, trunc)


def pick(logp_BxV: Array, keys_B: Array | None, t: Array, greedy: bool,
         temperature: float | Array = 1.0, trunc: Truncation = NO_TRUNCATION) -> Array:
  """Next tokens [B] (int32): the argmax, or row b drawn with fold_in(keys_B[b], t)."""
  if greedy:
    return jnp.argmax(logp_BxV, axis=-1).astype(jnp.int32)
  logits_BxV = sampled_logits(logp_BxV, temperature, trunc)
  step_keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(keys_B, t)
  return jax.vmap(jax.random.categorical)(step_keys, logits_BxV).astype(jnp.int32)
