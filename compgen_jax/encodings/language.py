"""The `language` encoding: a task as a short token sequence over a fixed vocabulary.

Vocabulary (V = M + language_bins + 2 ids): 0 is PAD, 1..M name the modules, M+1..M+bins+1 are
weight words, word(z) = floor(bins * z) (as the `tokens` encoding quantises). A task with active
modules m_1..m_k is [name(m_1), word(z_m1), ..., name(m_k), word(z_mk), PAD, ...] of length 2M.
The (name, word) pairs come in a fresh random order per task and draw, so order carries no
information. Token ids are returned as float32, like `tokens`, so every encoding has one dtype.
"""

import jax
import jax.numpy as jnp
import ml_collections

from compgen_jax.types import Array, PRNGKey, PyTree

PAD = 0  # every sequence encoding pads with token 0; students mask it


def language_init(key: PRNGKey, M: int, cfg: ml_collections.ConfigDict) -> PyTree:
  """No learned parameters; apply gets no config, so the settings ride along as scalars."""
  del key, M
  return {"bins": jnp.asarray(cfg.language_bins, jnp.float32),
          "shuffle": jnp.asarray(cfg.language_shuffle, jnp.bool_)}


def weight_words(z_BxM: Array, bins: Array) -> Array:
  """Word index floor(bins * z) clipped to [0, bins], int32 (0 for inactive modules)."""
  return jnp.clip(jnp.floor(bins * z_BxM), 0.0, bins).astype(jnp.int32)


def _order(active_BxM: Array, shuffle: Array, key: PRNGKey | None) -> Array:
  """Per row, the module indices with active ones first: randomly ordered, or by index."""
  B, M = active_BxM.shape
  rank_BxM = jnp.broadcast_to(jnp.arange(M, dtype=jnp.float32)[None, :] / M, (B, M))
  if key is not None:
    # Uniform scores give a uniformly random order among the active modules.
    rank_BxM = jnp.where(shuffle, jax.random.uniform(key, (B, M)), rank_BxM)
  return jnp.argsort(jnp.where(active_BxM, 0.0, 2.0) + rank_BxM, axis=-1)


def language_apply(params: PyTree, z_BxM: Array, context_BxCxF: Array | None,
                   key: PRNGKey | None = None) -> Array:
  """Token ids [B, 2M] (float32). Without a key (or language_shuffle=False) pairs are in
  module order."""
  del context_BxCxF
  z_BxM = jnp.asarray(z_BxM, jnp.float32)
  B, M = z_BxM.shape
  active_BxM = z_BxM > 0
  order_BxM = _order(active_BxM, params["shuffle"], key)
  names_BxM = jnp.broadcast_to(jnp.arange(1, M + 1, dtype=jnp.int32)[None, :], (B, M))
  words_BxM = weight_words(z_BxM, params["bins"]) + (M + 1)
  keep_BxM = jnp.take_along_axis(active_BxM, order_BxM, axis=-1)
  names_BxM = jnp.where(keep_BxM, jnp.take_along_axis(names_BxM, order_BxM, axis=-1), PAD)
  words_BxM = jnp.where(keep_BxM, jnp.take_along_axis(words_BxM, order_BxM, axis=-1), PAD)
  return jnp.stack([names_BxM, words_BxM], axis=-1).reshape(B, 2 * M).astype(jnp.float32)


def language_dim(M: int, cfg: ml_collections.ConfigDict, context_dim: int) -> int:
  """Sequence length L = 2M: room for a (name, word) pair per module."""
  del cfg, context_dim
  return 2 * M


def language_vocab_size(M: int, cfg: ml_collections.ConfigDict) -> int:
  """V = PAD + M module names + (language_bins + 1) weight words."""
  return 1 + M + cfg.language_bins + 1


def bag_of_counts(tokens_BxL: Array, vocab_size: int) -> Array:
  """Counts [B, V-1] of each non-PAD token id (how the MLP and hypernetwork read sequences)."""
  # PAD (0) shifts to -1, whose one_hot row is all zeros.
  ids_BxL = tokens_BxL.astype(jnp.int32) - 1
  return jax.nn.one_hot(ids_BxL, vocab_size - 1, dtype=jnp.float32).sum(axis=1)
