"""Decoder-only transformer student: pre-LayerNorm blocks, QK-norm, RoPE, causal attention.

The reference's architecture (compscale/model/transformer.py, policy.py TransformerPolicy): no
biases except on proj(x) and the readout, LayerNorms without bias, a final LayerNorm before the
readout. RoPE and masked attention are lm/attention.py's (shared with the letter LM).

Tokens are [encoding tokens, proj(x_1), ..., proj(x_N)]: one projected token for a vector phi(z),
or one learned embedding per token of a sequence encoding (PAD keys are masked out). Predictions
and activations are read at the x positions, so x_n sees the task and x_1..x_n only (hyperteacher:
independent samples, as the paper does; preference: the policy sees the past).
"""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections

from compgen_jax.encodings.language import PAD
from compgen_jax.lm import attention

# As the reference's blocks: no biases, Xavier-uniform kernels, LayerNorms with a scale, no bias.
_dense = functools.partial(nn.DenseGeneral, use_bias=False,
                           kernel_init=nn.initializers.xavier_uniform())
_layernorm = functools.partial(nn.LayerNorm, use_bias=False)


class Block(nn.Module):
  """h + attn(LN(h)), then h + ffw(LN(h)); q and k are LayerNormed per head before RoPE."""
  num_heads: int
  ffw_dim: int
  rope_base: float

  @nn.compact
  def __call__(self, h_BxTxD: jax.Array, mask_BxTxT: jax.Array) -> jax.Array:
    D = h_BxTxD.shape[-1]
    H, K = self.num_heads, D // self.num_heads
    pos_T = jnp.arange(h_BxTxD.shape[1])
    a_BxTxD = _layernorm(name="ln_attn")(h_BxTxD)
    # Separate q, k, v maps: Xavier's fan is D -> D per map, as in the reference.
    q, k, v = (_dense((H, K), name=name)(a_BxTxD) for name in ("query", "key", "value"))
    # QK-norm over the head dimension (one scale shared by the heads), then RoPE.
    q = attention.rope(_layernorm(name="ln_query")(q), pos_T, self.rope_base)
    k = attention.rope(_layernorm(name="ln_key")(k), pos_T, self.rope_base)
    o_BxTxHxK = attention.attend(q, k, v, mask_BxTxT)
    h_BxTxD = h_BxTxD + _dense(D, axis=(-2, -1), name="out")(o_BxTxHxK)
    f_BxTxF = _dense(self.ffw_dim, name="ffw_in")(_layernorm(name="ln_ffw")(h_BxTxD))
    return h_BxTxD + _dense(D, name="ffw_out")(nn.gelu(f_BxTxF))


class Transformer(nn.Module):
  """Returns predictions [B, N, O] and, at the x positions, each block's output and the final
  LayerNorm's output."""
  num_layers: int
  d_model: int
  num_heads: int
  ffw_dim: int
  rope_base: float
  out_dim: int
  vocab_size: int  # 0: phi is a vector (one token); else phi is L token ids

  @nn.compact
  def __call__(self, phi: jax.Array, x_BxNxI: jax.Array):
    if self.vocab_size:
      tokens_BxL = phi.astype(jnp.int32)
      enc_BxLxD = nn.Embed(self.vocab_size, self.d_model, name="enc_embed")(tokens_BxL)
      enc_valid_BxL = tokens_BxL != PAD
    else:
      # As the reference's TransformerPolicy: the encoding's projection has no bias, x's has.
      enc_BxLxD = nn.Dense(self.d_model, use_bias=False, name="enc_proj")(phi)[:, None, :]
      enc_valid_BxL = jnp.ones(enc_BxLxD.shape[:2], jnp.bool_)
    x_BxNxD = nn.Dense(self.d_model, name="x_proj")(x_BxNxI)
    h_BxTxD = jnp.concatenate([enc_BxLxD, x_BxNxD], axis=1)
    valid_BxN = jnp.ones(x_BxNxD.shape[:2], jnp.bool_)
    valid_BxT = jnp.concatenate([enc_valid_BxL, valid_BxN], axis=1)
    # causal, and PAD keys masked (a query always sees itself)
    mask_BxTxT = attention.attention_mask(valid_BxT, jnp.arange(valid_BxT.shape[1]))
    L, acts = enc_BxLxD.shape[1], []
    for i in range(self.num_layers):
      h_BxTxD = Block(self.num_heads, self.ffw_dim, self.rope_base, name=f"block_{i}")(
          h_BxTxD, mask_BxTxT)
      acts.append(h_BxTxD[:, L:])
    out_BxNxD = _layernorm(name="ln_final")(acts[-1])
    y_BxNxO = nn.Dense(self.out_dim, name="readout")(out_BxNxD)
    return y_BxNxO, (*acts, out_BxNxD)


def _module(cfg: ml_collections.ConfigDict, out_dim: int, vocab_size: int) -> Transformer:
  return Transformer(num_layers=cfg.num_layers, d_model=cfg.d_model, num_heads=cfg.num_heads,
                     ffw_dim=cfg.ffw_dim, rope_base=float(cfg.rope_base), out_dim=out_dim,
                     vocab_size=vocab_size)


def init(key: jax.Array, enc_dim: int, x_dim: int, out_dim: int, cfg: ml_collections.ConfigDict,
         vocab_size: int = 0) -> dict:
  """Parameters; vocab_size > 0: phi is a sequence of enc_dim token ids (a learned embedding)."""
  phi = jnp.zeros((1, enc_dim), jnp.float32)
  x = jnp.zeros((1, 1, x_dim), jnp.float32)
  return _module(cfg, out_dim, vocab_size).init(key, phi, x)["params"]


def apply(params: dict, phi: jax.Array, x_BxNxI: jax.Array, out_dim: int,
          cfg: ml_collections.ConfigDict) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Predictions [B, N, O] and {block_i, ln_final: [B, N, d_model]} at the x positions (the
  reference probes the block outputs and the final LayerNorm, not the readout).

  phi is [B, E] (vector encoding) or [B, L] token ids, as the parameters were made for.
  """
  vocab_size = params["enc_embed"]["embedding"].shape[0] if "enc_embed" in params else 0
  y, acts = _module(cfg, out_dim, vocab_size).apply({"params": params}, phi, x_BxNxI)
  names = [f"block_{i}" for i in range(cfg.num_layers)] + ["ln_final"]
  return y, dict(zip(names, acts, strict=True))
