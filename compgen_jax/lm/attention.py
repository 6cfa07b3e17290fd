"""Rotary positions and masked dot-product attention: one implementation for the letter LM
(lm/transformer.py) and the transformer student (students/transformer.py).

Shapes: B batch, Q queries, S keys, H heads, K head dimension.
"""

import jax
import jax.numpy as jnp
import numpy as np

from compgen_jax.types import Array

NEG_INF = -1e9  # finite, so a fully masked row cannot produce NaN


def rope(x_BxTxHxK: Array, pos_T: Array, base: float = 10_000.0) -> Array:
  """Rotates feature pairs (k, k + K/2) by pos * base^(-2k/K) (split-half convention):
  <rope(q, m), rope(k, n)> depends on m - n only."""
  K = x_BxTxHxK.shape[-1]
  freq_F = base ** (-jnp.arange(K // 2, dtype=jnp.float32) * 2.0 / K)
  angle_TxF = pos_T.astype(jnp.float32)[:, None] * freq_F[None, :]
  cos, sin = jnp.cos(angle_TxF)[None, :, None, :], jnp.sin(angle_TxF)[None, :, None, :]
  x1, x2 = x_BxTxHxK[..., : K // 2], x_BxTxHxK[..., K // 2:]
  return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


def attention_mask(valid_BxS: Array, pos_Q: Array, causal: bool = True) -> Array:
  """[B, Q, S]: the query at position pos_Q[q] may attend key s (at position s) when s is valid
  and, if causal, s <= pos_Q[q]. A query always sees its own position: no row is empty."""
  pos_S = jnp.arange(valid_BxS.shape[1])
  self_QxS = pos_S[None, :] == pos_Q[:, None]
  if causal:
    see_QxS = pos_S[None, :] <= pos_Q[:, None]
  else:
    see_QxS = jnp.ones(self_QxS.shape, jnp.bool_)
  return see_QxS[None] & (valid_BxS[:, None, :] | self_QxS[None])


def attend(q_BxQxHxK: Array, k_BxSxHxK: Array, v_BxSxHxK: Array, mask_BxQxS: Array) -> Array:
  """softmax(q k^T / sqrt(K), masked) v per head: [B, Q, H, K]."""
  K = q_BxQxHxK.shape[-1]
  if q_BxQxHxK.shape[1] == 1:  # one query (decoding): multiply-reduce beats tiny batched matmuls
    logits_BxSxH = jnp.sum(k_BxSxHxK * q_BxQxHxK, axis=-1) / np.sqrt(K)
    logits_BxSxH = jnp.where(mask_BxQxS[:, 0, :, None], logits_BxSxH, NEG_INF)
    attn_BxSxH = jax.nn.softmax(logits_BxSxH, axis=1)
    return jnp.sum(attn_BxSxH[..., None] * v_BxSxHxK, axis=1)[:, None]
  logits_BxHxQxS = jnp.einsum("bqhk,bshk->bhqs", q_BxQxHxK, k_BxSxHxK) / np.sqrt(K)
  logits_BxHxQxS = jnp.where(mask_BxQxS[:, None], logits_BxHxQxS, NEG_INF)
  attn_BxHxQxS = jax.nn.softmax(logits_BxHxQxS, axis=-1)
  return jnp.einsum("bhqs,bshk->bqhk", attn_BxHxQxS, v_BxSxHxK)
