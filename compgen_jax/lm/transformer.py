"""A small causal transformer LM (flax linen) behind the `Model` adapter, with a KV cache.

Pre-LayerNorm blocks with biases, one fused qkv map, rotary / learned / no positions, a final
LayerNorm and a tied or untied head. Attention and RoPE are lm/attention.py's. Initialisation
(`init`): flax's defaults (LeCun-normal kernels, embeddings of std 1/sqrt(width), LayerNorm
epsilon 1e-6), or GPT-2's (Hugging Face GPT2PreTrainedModel._init_weights: `gpt2_params`).
"""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import traverse_util

from compgen_jax.lm import attention
from compgen_jax.lm.model import Model
from compgen_jax.types import Array, PRNGKey, PyTree

POSITIONS = ("rotary", "learned", "none")
INITS = ("flax", "gpt2")
LN_EPS = {"flax": 1e-6, "gpt2": 1e-5}  # flax's LayerNorm default; GPT2Config.layer_norm_epsilon
GPT2_STD = 0.02  # GPT2Config.initializer_range
RESIDUAL_OUT = ("attn_out", "mlp_out")  # GPT-2's c_proj: std / sqrt(2 num_layers)


class Block(nn.Module):
  """Pre-LayerNorm attention + MLP block; attends to a KV cache when one is given."""
  width: int
  num_heads: int
  mlp_ratio: int
  use_rotary: bool
  ln_eps: float = 1e-6

  @nn.compact
  def __call__(self, x_BxLxD, pos_L, mask_BxLxS, kv=None, index=None):
    b, l, d = x_BxLxD.shape
    h, k = self.num_heads, d // self.num_heads
    # Dense layers see [B*L, D]: XLA:CPU differentiates 2-D matmuls much faster than 3-D ones.
    x_NxD = x_BxLxD.reshape(b * l, d)
    qkv = nn.Dense(3 * d, name="qkv")(nn.LayerNorm(self.ln_eps, name="ln_attn")(x_NxD))
    q_BxLxHxK, k_BxLxHxK, v_BxLxHxK = jnp.split(qkv.reshape(b, l, 3 * h, k), 3, axis=2)
    if self.use_rotary:
      q_BxLxHxK, k_BxLxHxK = attention.rope(q_BxLxHxK, pos_L), attention.rope(k_BxLxHxK, pos_L)
    if kv is None:
      keys, vals = k_BxLxHxK, v_BxLxHxK
    else:  # write the new keys at `index`, attend over the whole (masked) buffer
      keys = jax.lax.dynamic_update_slice(kv[0], k_BxLxHxK.astype(kv[0].dtype), (0, index, 0, 0))
      vals = jax.lax.dynamic_update_slice(kv[1], v_BxLxHxK.astype(kv[1].dtype), (0, index, 0, 0))
      kv = (keys, vals)
    out_NxD = attention.attend(q_BxLxHxK, keys, vals, mask_BxLxS).reshape(b * l, d)
    x_NxD = x_NxD + nn.Dense(d, name="attn_out")(out_NxD)
    y = nn.LayerNorm(self.ln_eps, name="ln_mlp")(x_NxD)
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
  ln_eps: float = 1e-6

  @nn.compact
  def __call__(self, tokens_BxL, valid_BxL, cache=None):
    embed = nn.Embed(self.vocab_size, self.width, name="embed")
    index = 0 if cache is None else cache["index"]
    pos_L = index + jnp.arange(tokens_BxL.shape[1])
    if cache is None:
      valid_BxS = valid_BxL
    else:  # keys are the whole buffer: its validity so far, with the new tokens written in
      valid_BxS = jax.lax.dynamic_update_slice(cache["valid"], valid_BxL, (0, index))
    mask_BxLxS = attention.attention_mask(valid_BxS, pos_L)
    x = embed(tokens_BxL)
    if self.positions == "learned":
      x = x + nn.Embed(self.max_len, self.width, name="pos_embed")(pos_L)[None]
    new_layers = []
    for i in range(self.num_layers):
      kv = None if cache is None else cache["layers"][i]
      x, kv = Block(self.width, self.num_heads, self.mlp_ratio, self.positions == "rotary",
                    self.ln_eps, name=f"block_{i}")(x, pos_L, mask_BxLxS, kv, index)
      new_layers.append(kv)
    b, l, d = x.shape
    x_NxD = nn.LayerNorm(self.ln_eps, name="ln_final")(x.reshape(b * l, d))
    if self.tie_head:
      logits = embed.attend(x_NxD)
    else:
      logits = nn.Dense(self.vocab_size, name="head")(x_NxD)
    logits = logits.reshape(b, l, self.vocab_size)
    if cache is None:
      return logits, None
    return logits, {"index": index + tokens_BxL.shape[1], "valid": valid_BxS,
                    "layers": tuple(new_layers)}


def gpt2_params(shapes: PyTree, key: PRNGKey, num_layers: int) -> PyTree:
  """GPT-2's initialisation of a CausalLM parameter tree (`shapes`: its leaves' shapes and
  dtypes): embeddings and kernels N(0, 0.02), the residual output projections (attn_out,
  mlp_out) N(0, 0.02 / sqrt(2 num_layers)), biases 0, LayerNorm scales 1."""
  flat = traverse_util.flatten_dict(shapes)
  keys = jax.random.split(key, len(flat))
  out = {}
  for k, (path, leaf) in zip(keys, sorted(flat.items()), strict=True):
    if path[-1] == "bias":
      out[path] = jnp.zeros(leaf.shape, leaf.dtype)
    elif path[-1] == "scale":
      out[path] = jnp.ones(leaf.shape, leaf.dtype)
    elif path[-1] in ("kernel", "embedding"):
      std = GPT2_STD / math.sqrt(2 * num_layers) if path[-2] in RESIDUAL_OUT else GPT2_STD
      out[path] = std * jax.random.normal(k, leaf.shape, leaf.dtype)
    else:
      raise ValueError(f"no GPT-2 initialisation for parameter {'/'.join(path)}")
  return traverse_util.unflatten_dict(out)


def make_lm(cfg, vocab_size: int, *, bos_id: int, eos_id: int, pad_id: int) -> Model:
  """A `Model` for the transformer described by `cfg` (width, num_layers, num_heads, mlp_ratio,
  positions, max_len, tie_head, init: INITS, 'flax' when absent) over a vocabulary with these
  special ids."""
  scheme = cfg.get("init", "flax")
  if scheme not in INITS:
    raise ValueError(f"model init {scheme!r}: allowed {INITS}")
  module = CausalLM(vocab_size=vocab_size, width=cfg.width, num_layers=cfg.num_layers,
                    num_heads=cfg.num_heads, mlp_ratio=cfg.mlp_ratio, positions=cfg.positions,
                    max_len=cfg.max_len, tie_head=cfg.tie_head, ln_eps=LN_EPS[scheme])
  head_dim = cfg.width // cfg.num_heads

  def init(key: PRNGKey) -> PyTree:
    tokens = jnp.zeros((1, 2), jnp.int32)
    if scheme == "gpt2":  # only the shapes of flax's init; every value drawn from `key`
      shapes = jax.eval_shape(lambda: module.init(jax.random.key(0), tokens,
                                                  jnp.ones(tokens.shape, bool)))
      return gpt2_params(shapes["params"], key, cfg.num_layers)
    return module.init(key, tokens, jnp.ones(tokens.shape, bool))["params"]

  def apply(params: PyTree, tokens_BxL: Array, cache, valid_BxL: Array):
    return module.apply({"params": params}, tokens_BxL, valid_BxL, cache)

  def init_cache(batch: int, max_len: int):
    zeros = jnp.zeros((batch, max_len, cfg.num_heads, head_dim), jnp.float32)
    return {"index": jnp.zeros((), jnp.int32), "valid": jnp.zeros((batch, max_len), bool),
            "layers": tuple((zeros, zeros) for _ in range(cfg.num_layers))}

  # rotary and learned positions number cache slots (index + arange, padding included);
  # without positions a padding slot changes nothing
  return Model(apply=apply, init_cache=init_cache, vocab_size=vocab_size, bos_id=bos_id,
               eos_id=eos_id, pad_id=pad_id, init=init,
               positions_count="tokens" if cfg.positions == "none" else "slots")
