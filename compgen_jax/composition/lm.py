"""A small causal transformer LM (flax linen) with a full forward pass and a KV-cache step.

Every model the composition code uses is a `Model`: pure functions over a params pytree, so a
real checkpoint (or a uniform model with no params) can be plugged in later.
  forward(params, tokens_BxT) -> logits_BxTxV          (teacher-forced, causal)
  init_cache(batch, max_len) -> cache
  step(params, tokens_B, cache) -> (logits_BxV, cache)  (one new token per sequence)
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from compgen_jax.types import Array, PRNGKey, PyTree

POSITIONS = ("rotary", "learned", "none")


class Model(NamedTuple):
  """An autoregressive model as pure functions; `init` is None for models without params."""
  forward: Callable[[PyTree, Array], Array]
  init_cache: Callable[[int, int], Any]
  step: Callable[[PyTree, Array, Any], tuple[Array, Any]]
  init: Callable[[PRNGKey], PyTree] | None = None


def rotary(x_BxLxHxK: Array, pos_L: Array, base: float = 10000.0) -> Array:
  """Rotary position embedding on the last axis (split-half convention)."""
  half = x_BxLxHxK.shape[-1] // 2
  freq_F = base ** (-jnp.arange(half, dtype=jnp.float32) / half)
  angle_LxF = pos_L.astype(jnp.float32)[:, None] * freq_F[None, :]
  cos, sin = jnp.cos(angle_LxF)[None, :, None, :], jnp.sin(angle_LxF)[None, :, None, :]
  x1, x2 = x_BxLxHxK[..., :half], x_BxLxHxK[..., half:]
  return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


class Block(nn.Module):
  """Pre-LayerNorm attention + MLP block; attends to a KV cache when one is given."""
  width: int
  num_heads: int
  mlp_ratio: int
  use_rotary: bool

  @nn.compact
  def __call__(self, x_BxLxD, pos_L, kv=None, index=None):
    b, l, d = x_BxLxD.shape
    h, k = self.num_heads, d // self.num_heads
    # Dense layers see [B*L, D]: XLA:CPU differentiates 2-D matmuls much faster than 3-D ones.
    x_NxD = x_BxLxD.reshape(b * l, d)
    qkv = nn.Dense(3 * d, name="qkv")(nn.LayerNorm(name="ln_attn")(x_NxD))
    q_BxLxHxK, k_BxLxHxK, v_BxLxHxK = jnp.split(qkv.reshape(b, l, 3 * h, k), 3, axis=2)
    if self.use_rotary:
      q_BxLxHxK, k_BxLxHxK = rotary(q_BxLxHxK, pos_L), rotary(k_BxLxHxK, pos_L)
    if kv is None:
      keys, vals, key_pos = k_BxLxHxK, v_BxLxHxK, pos_L
    else:  # write the new keys at `index`, attend over the whole (masked) buffer
      keys = jax.lax.dynamic_update_slice(kv[0], k_BxLxHxK.astype(kv[0].dtype), (0, index, 0, 0))
      vals = jax.lax.dynamic_update_slice(kv[1], v_BxLxHxK.astype(kv[1].dtype), (0, index, 0, 0))
      key_pos = jnp.arange(keys.shape[1])
      kv = (keys, vals)
    mask_LxS = key_pos[None, :] <= pos_L[:, None]
    if l == 1:  # one query per sequence (decoding): multiply-reduce beats tiny batched matmuls
      logits_BxSxH = jnp.sum(keys * q_BxLxHxK, axis=-1) * (k ** -0.5)
      logits_BxSxH = jnp.where(mask_LxS[0][None, :, None], logits_BxSxH, -1e30)
      attn_BxSxH = jax.nn.softmax(logits_BxSxH, axis=1)
      out_NxD = jnp.sum(attn_BxSxH[..., None] * vals, axis=1).reshape(b, d)
    else:
      logits_BxHxLxS = jnp.einsum("blhk,bshk->bhls", q_BxLxHxK, keys) * (k ** -0.5)
      logits_BxHxLxS = jnp.where(mask_LxS[None, None], logits_BxHxLxS, -1e30)
      attn = jax.nn.softmax(logits_BxHxLxS, axis=-1)
      out_NxD = jnp.einsum("bhls,bshk->blhk", attn, vals).reshape(b * l, d)
    x_NxD = x_NxD + nn.Dense(d, name="attn_out")(out_NxD)
    y = nn.LayerNorm(name="ln_mlp")(x_NxD)
    y = nn.Dense(self.mlp_ratio * d, name="mlp_in")(y)
    y = nn.Dense(d, name="mlp_out")(nn.gelu(y))
    return (x_NxD + y).reshape(b, l, d), kv


class CausalLM(nn.Module):
  """Token embedding, positions, pre-LN blocks, final LayerNorm and a tied or untied head."""
  vocab_size: int
  width: int
  num_layers: int
  num_heads: int
  mlp_ratio: int = 4
  positions: str = "rotary"
  max_len: int = 128
  tie_head: bool = False

  @nn.compact
  def __call__(self, tokens_BxL, cache=None):
    embed = nn.Embed(self.vocab_size, self.width, name="embed")
    index = 0 if cache is None else cache["index"]
    pos_L = index + jnp.arange(tokens_BxL.shape[1])
    x = embed(tokens_BxL)
    if self.positions == "learned":
      x = x + nn.Embed(self.max_len, self.width, name="pos_embed")(pos_L)[None]
    new_layers = []
    for i in range(self.num_layers):
      kv = None if cache is None else cache["layers"][i]
      x, kv = Block(self.width, self.num_heads, self.mlp_ratio, self.positions == "rotary",
                    name=f"block_{i}")(x, pos_L, kv, index)
      new_layers.append(kv)
    b, l, d = x.shape
    x_NxD = nn.LayerNorm(name="ln_final")(x.reshape(b * l, d))
    if self.tie_head:
      logits = embed.attend(x_NxD)
    else:
      logits = nn.Dense(self.vocab_size, name="head")(x_NxD)
    logits = logits.reshape(b, l, self.vocab_size)
    if cache is None:
      return logits, None
    return logits, {"index": index + tokens_BxL.shape[1], "layers": tuple(new_layers)}


def make_lm(cfg, vocab_size: int) -> Model:
  """A `Model` for the transformer described by `cfg` (width, num_layers, num_heads, ...)."""
  module = CausalLM(vocab_size=vocab_size, width=cfg.width, num_layers=cfg.num_layers,
                    num_heads=cfg.num_heads, mlp_ratio=cfg.mlp_ratio, positions=cfg.positions,
                    max_len=cfg.max_len, tie_head=cfg.tie_head)
  head_dim = cfg.width // cfg.num_heads

  def init(key: PRNGKey) -> PyTree:
    return module.init(key, jnp.zeros((1, 2), jnp.int32))["params"]

  def forward(params: PyTree, tokens_BxT: Array) -> Array:
    return module.apply({"params": params}, tokens_BxT)[0]

  def init_cache(batch: int, max_len: int):
    zeros = jnp.zeros((batch, max_len, cfg.num_heads, head_dim), jnp.float32)
    return {"index": jnp.zeros((), jnp.int32),
            "layers": tuple((zeros, zeros) for _ in range(cfg.num_layers))}

  def step(params: PyTree, tokens_B: Array, cache) -> tuple[Array, Any]:
    logits_Bx1xV, cache = module.apply({"params": params}, tokens_B[:, None], cache)
    return logits_Bx1xV[:, 0], cache

  return Model(forward=forward, init_cache=init_cache, step=step, init=init)


def full_forward_model(model: Model) -> Model:
  """The same model decoding without a KV cache: each step re-runs the full forward pass.

  The 'cache' is the token buffer so far; used to check the KV cache and to time it.
  """

  def init_cache(batch: int, max_len: int):
    return {"index": jnp.zeros((), jnp.int32), "tokens": jnp.zeros((batch, max_len), jnp.int32)}

  def step(params, tokens_B, cache):
    index = cache["index"]
    buf_BxT = jax.lax.dynamic_update_slice(cache["tokens"], tokens_B[:, None].astype(jnp.int32),
                                           (0, index))
    logits_BxTxV = model.forward(params, buf_BxT)
    logits_BxV = jax.lax.dynamic_index_in_dim(logits_BxTxV, index, axis=1, keepdims=False)
    return logits_BxV, {"index": index + 1, "tokens": buf_BxT}

  return model._replace(init_cache=init_cache, step=step)


def uniform_model(vocab_size: int) -> Model:
  """The uniform distribution over the vocabulary at every step (params: None)."""

  def zeros(tokens):  # depends on the tokens so XLA does not constant-fold large arrays
    return (jnp.zeros(tokens.shape + (vocab_size,), jnp.float32)
            + 0.0 * tokens[..., None].astype(jnp.float32))

  def forward(params, tokens_BxT):
    del params
    return zeros(tokens_BxT)

  def step(params, tokens_B, cache):
    del params
    return zeros(tokens_B), cache

  return Model(forward=forward, init_cache=lambda batch, max_len: (), step=step, init=None)
