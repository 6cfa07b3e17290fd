"""Gemma-2 as pure JAX functions behind the `Model` adapter, loaded from a local HF directory.

Per block: RMSNorm (scale 1 + w) before and after attention and before and after a tanh-GeGLU MLP;
grouped-query attention with queries scaled by query_pre_attn_scalar^-1/2 and soft-capped logits;
sliding-window and global layers alternating. Embedding scaled by sqrt(width), tied head, final
soft-cap. Layers are stacked on a leading axis and run under `lax.scan`; whether a layer slides is
an array-valued flag, so one scan body serves both kinds.

Left padding: a token's position counts the valid tokens before it, and the window is measured
in positions, so padding never changes a sequence. The KV cache keeps every position (a sliding
layer masks old keys rather than evicting them), so any chunking of the prefill is exact.

Shapes: N layers, B batch, L new tokens, S keys (cache length), D width, H query heads,
G kv heads, K head dim, F mlp width, V vocab.
"""

import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from compgen_jax import checkpointing
from compgen_jax.lm import attention, loading
from compgen_jax.lm.model import Model
from compgen_jax.types import Array, CheckpointError, PRNGKey, PyTree

GLOBAL_WINDOW = 2**30  # sliding_window = null in config.json: sliding layers see everything


class Gemma2Config(NamedTuple):
  vocab_size: int
  width: int
  num_layers: int
  num_heads: int
  num_kv_heads: int
  head_dim: int
  mlp_dim: int
  rms_eps: float
  rope_base: float
  query_pre_attn_scalar: float
  attn_softcap: float | None
  final_softcap: float | None
  sliding_window: int
  sliding_layers: tuple[bool, ...]
  bos_id: int
  eos_id: int
  pad_id: int


def config_from_hf(hf: dict, where: str = "config.json") -> Gemma2Config:
  """Our config from a Hugging Face Gemma-2 config.json dict; CheckpointError naming `where`
  for anything this implementation does not reproduce."""
  def need(ok: bool, what: str) -> None:
    if not ok:
      raise CheckpointError(f"{where!r}: {what}")

  need(hf.get("model_type") == "gemma2", f"model_type is {hf.get('model_type')!r}, not 'gemma2'")
  act = hf.get("hidden_activation") or hf.get("hidden_act")
  need(act in ("gelu_pytorch_tanh", "gelu_tanh"), f"activation {act!r} is not tanh-gelu")
  need(not hf.get("attention_bias", False), "attention_bias is not supported")
  need(hf.get("tie_word_embeddings", True), "an untied head is not supported")
  need(not hf.get("use_bidirectional_attention"), "bidirectional attention is not supported")
  rope = hf.get("rope_parameters") or {"rope_theta": hf.get("rope_theta", 10_000.0)}
  need(rope.get("rope_type", "default") == "default" and not hf.get("rope_scaling"),
       f"only default RoPE is supported, got {rope}")
  n = hf["num_hidden_layers"]
  types = hf.get("layer_types") or [
      "sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
  need(len(types) == n and set(types) <= {"sliding_attention", "full_attention"},
       f"layer_types {types} do not name {n} sliding/full layers")
  heads, kv_heads = hf["num_attention_heads"], hf["num_key_value_heads"]
  need(heads % kv_heads == 0, f"{heads} heads are not a multiple of {kv_heads} kv heads")
  eos = hf.get("eos_token_id", 1)
  return Gemma2Config(
      vocab_size=hf["vocab_size"], width=hf["hidden_size"], num_layers=n, num_heads=heads,
      num_kv_heads=kv_heads, head_dim=hf.get("head_dim", hf["hidden_size"] // heads),
      mlp_dim=hf["intermediate_size"], rms_eps=hf.get("rms_norm_eps", 1e-6),
      rope_base=float(rope["rope_theta"]),
      query_pre_attn_scalar=float(hf.get("query_pre_attn_scalar", 256)),
      attn_softcap=hf.get("attn_logit_softcapping"),
      final_softcap=hf.get("final_logit_softcapping"),
      sliding_window=hf.get("sliding_window") or GLOBAL_WINDOW,
      sliding_layers=tuple(t == "sliding_attention" for t in types),
      bos_id=hf.get("bos_token_id", 2), eos_id=eos[0] if isinstance(eos, list) else eos,
      pad_id=hf.get("pad_token_id", 0))


# ours -> (HF name inside a layer, HF shape, HF array -> ours); HF Linear weights are [out, in]
def _layer_tensors(c: Gemma2Config) -> dict:
  d, h, g, k, f = c.width, c.num_heads, c.num_kv_heads, c.head_dim, c.mlp_dim
  norm = lambda name: (name, (d,), lambda w: w)
  return {
      "attn_norm": norm("input_layernorm"),
      "q": ("self_attn.q_proj", (h * k, d), lambda w: w.T.reshape(d, h, k)),
      "k": ("self_attn.k_proj", (g * k, d), lambda w: w.T.reshape(d, g, k)),
      "v": ("self_attn.v_proj", (g * k, d), lambda w: w.T.reshape(d, g, k)),
      "o": ("self_attn.o_proj", (d, h * k), lambda w: w.T.reshape(h, k, d)),
      "post_attn_norm": norm("post_attention_layernorm"),
      "pre_mlp_norm": norm("pre_feedforward_layernorm"),
      "gate": ("mlp.gate_proj", (f, d), lambda w: w.T),
      "up": ("mlp.up_proj", (f, d), lambda w: w.T),
      "down": ("mlp.down_proj", (d, f), lambda w: w.T),
      "post_mlp_norm": norm("post_feedforward_layernorm"),
  }


def param_shapes(c: Gemma2Config, dtype=jnp.float32) -> PyTree:
  """The params pytree as ShapeDtypeStructs (what orbax restores against)."""
  ours = lambda fn, shape: jax.eval_shape(fn, jax.ShapeDtypeStruct(shape, dtype)).shape
  layers = {name: jax.ShapeDtypeStruct((c.num_layers,) + ours(fn, shape), dtype)
            for name, (_, shape, fn) in _layer_tensors(c).items()}
  return {"embed": jax.ShapeDtypeStruct((c.vocab_size, c.width), dtype),
          "final_norm": jax.ShapeDtypeStruct((c.width,), dtype), "layers": layers}


def params_from_hf(directory: str, c: Gemma2Config, dtype=jnp.float32) -> PyTree:
  """Params from the safetensors shards of `directory`, layers stacked on a leading axis."""
  table = _layer_tensors(c)
  shapes = {"model.embed_tokens.weight": (c.vocab_size, c.width), "model.norm.weight": (c.width,)}
  for i in range(c.num_layers):
    shapes.update({f"model.layers.{i}.{hf}.weight": shape for hf, shape, _ in table.values()})
  t = loading.read_tensors(directory, shapes)
  cast = lambda a: jnp.asarray(a, dtype)
  layers = {name: cast(np.stack([fn(t[f"model.layers.{i}.{hf}.weight"])
                                 for i in range(c.num_layers)]))
            for name, (hf, _, fn) in table.items()}
  return {"embed": cast(t["model.embed_tokens.weight"]), "final_norm": cast(t["model.norm.weight"]),
          "layers": layers}


def init_params(c: Gemma2Config, key: PRNGKey, dtype=jnp.float32) -> PyTree:
  """Random params (tests and smoke runs): normal(0, 0.1) everywhere, norms included."""
  leaves, treedef = jax.tree.flatten(param_shapes(c, dtype))
  keys = jax.random.split(key, len(leaves))
  return treedef.unflatten([0.1 * jax.random.normal(k, s.shape, dtype)
                            for k, s in zip(keys, leaves, strict=True)])


def rms_norm(x: Array, w: Array, eps: float) -> Array:
  """x / rms(x) * (1 + w), in float32 and cast back (as Gemma does)."""
  x32 = x.astype(jnp.float32)
  y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
  w = w.astype(jnp.float32).reshape((1,) * (x.ndim - 1) + w.shape)
  return (y * (1.0 + w)).astype(x.dtype)


def soft_cap(x: Array, cap: float | None) -> Array:
  return x if cap is None else cap * jnp.tanh(x / cap)


def _rope(x_BxLxHxK: Array, pos_BxL: Array, base: float) -> Array:
  # lm/attention.rope takes one position vector: vmap it over the batch (left padding)
  rot = jax.vmap(lambda x, p: attention.rope(x[None], p, base)[0])(x_BxLxHxK, pos_BxL)
  return rot.astype(x_BxLxHxK.dtype)


def _attend(c: Gemma2Config, q_BxLxHxK, k_BxSxGxK, v_BxSxGxK, mask_BxLxS) -> Array:
  """Grouped-query attention: query head j reads kv head j // (H / G), as HF's repeat_kv."""
  b, l, h, k = q_BxLxHxK.shape
  g = k_BxSxGxK.shape[2]
  q_BxLxGxRxK = q_BxLxHxK.reshape(b, l, g, h // g, k)
  logits = jnp.einsum("blgrk,bsgk->bgrls", q_BxLxGxRxK, k_BxSxGxK,
                      preferred_element_type=jnp.float32) * c.query_pre_attn_scalar ** -0.5
  logits = soft_cap(logits, c.attn_softcap)
  logits = jnp.where(mask_BxLxS[:, None, None], logits, attention.NEG_INF)
  probs = jax.nn.softmax(logits, axis=-1).astype(v_BxSxGxK.dtype)
  return jnp.einsum("bgrls,bsgk->blgrk", probs, v_BxSxGxK).reshape(b, l, h, k)


def _block(c: Gemma2Config, x_BxLxD, layer, sliding, pos_BxL, causal_BxLxS, window_BxLxS, kv,
           index):
  h = rms_norm(x_BxLxD, layer["attn_norm"], c.rms_eps)
  q = _rope(jnp.einsum("bld,dhk->blhk", h, layer["q"]), pos_BxL, c.rope_base)
  k = _rope(jnp.einsum("bld,dgk->blgk", h, layer["k"]), pos_BxL, c.rope_base)
  v = jnp.einsum("bld,dgk->blgk", h, layer["v"])
  if kv is not None:  # write the new keys at `index`, attend over the whole (masked) buffer
    k = jax.lax.dynamic_update_slice(kv[0], k.astype(kv[0].dtype), (0, index, 0, 0))
    v = jax.lax.dynamic_update_slice(kv[1], v.astype(kv[1].dtype), (0, index, 0, 0))
    kv = (k, v)
  mask_BxLxS = causal_BxLxS & (window_BxLxS | ~sliding)
  out = jnp.einsum("blhk,hkd->bld", _attend(c, q, k, v, mask_BxLxS), layer["o"])
  x_BxLxD = x_BxLxD + rms_norm(out, layer["post_attn_norm"], c.rms_eps)
  h = rms_norm(x_BxLxD, layer["pre_mlp_norm"], c.rms_eps)
  h = jax.nn.gelu(h @ layer["gate"], approximate=True) * (h @ layer["up"])
  return x_BxLxD + rms_norm(h @ layer["down"], layer["post_mlp_norm"], c.rms_eps), kv


def apply(c: Gemma2Config, params: PyTree, tokens_BxL: Array, cache, valid_BxL: Array):
  """The adapter's apply: float32 logits [B, L, V] and the new cache (None without one)."""
  index = 0 if cache is None else cache["index"]
  length = tokens_BxL.shape[1]
  valid_BxS = valid_BxL if cache is None else jax.lax.dynamic_update_slice(
      cache["valid"], valid_BxL, (0, index))
  pos_BxS = jnp.maximum(jnp.cumsum(valid_BxS, axis=1) - 1, 0)
  pos_BxL = jax.lax.dynamic_slice_in_dim(pos_BxS, index, length, axis=1)
  causal_BxLxS = attention.attention_mask(valid_BxS, index + jnp.arange(length))
  window_BxLxS = pos_BxL[:, :, None] - pos_BxS[:, None, :] < c.sliding_window
  embed = params["embed"]
  x = embed[tokens_BxL] * jnp.asarray(np.sqrt(c.width), embed.dtype)

  def body(x, xs):
    layer, sliding, kv = xs
    return _block(c, x, layer, sliding, pos_BxL, causal_BxLxS, window_BxLxS, kv, index)

  kv = None if cache is None else (cache["k"], cache["v"])
  x, kv = jax.lax.scan(body, x, (params["layers"], jnp.asarray(c.sliding_layers), kv))
  x = rms_norm(x, params["final_norm"], c.rms_eps)
  logits = jnp.einsum("bld,vd->blv", x, embed, preferred_element_type=jnp.float32)
  logits = soft_cap(logits, c.final_softcap)
  if cache is None:
    return logits, None
  return logits, {"index": index + length, "valid": valid_BxS, "k": kv[0], "v": kv[1]}


def make_model(c: Gemma2Config, dtype=jnp.float32) -> Model:
  """The `Model` adapter; params (and the KV cache) are in `dtype`, logits in float32."""

  def init_cache(batch: int, max_len: int):
    zeros = jnp.zeros((c.num_layers, batch, max_len, c.num_kv_heads, c.head_dim), dtype)
    return {"index": jnp.zeros((), jnp.int32), "valid": jnp.zeros((batch, max_len), bool),
            "k": zeros, "v": zeros}

  return Model(apply=lambda *args: apply(c, *args), init_cache=init_cache,
               vocab_size=c.vocab_size, bos_id=c.bos_id, eos_id=c.eos_id, pad_id=c.pad_id,
               positions_count="tokens",  # cumsum of the valid mask: padding shifts nothing
               init=lambda key: init_params(c, key, dtype))


def load(directory: str, *, dtype=jnp.float32, cache_dir: str | None = None,
         vocab_size: int | None = None) -> tuple[Model, PyTree]:
  """(model, params) from a local HF Gemma-2 directory (config.json, *.safetensors).

  With `cache_dir`, the converted params are saved there with orbax on the first load and
  restored from it afterwards. `vocab_size`, when given, must match the checkpoint's (models
  composed together share one vocabulary).
  """
  hf, config_path = loading.read_config(directory)
  c = config_from_hf(hf, config_path)
  if vocab_size is not None and c.vocab_size != vocab_size:
    raise CheckpointError(f"{config_path!r}: vocab_size {c.vocab_size}, expected {vocab_size}")
  if cache_dir is not None and checkpointing.available_steps(cache_dir):
    _, params = checkpointing.restore(cache_dir, param_shapes(c, dtype))
  else:
    params = params_from_hf(directory, c, dtype)
    if cache_dir is not None:
      os.makedirs(cache_dir, exist_ok=True)
      checkpointing.save(checkpointing.manager(cache_dir), 0, params)
  return make_model(c, dtype), params


def load_tokenizer(directory: str, model: Model):
  """The SentencePiece tokenizer of `directory`, checked against `model`'s vocabulary and
  special ids (`encode(text)` gives ids without BOS: prepend model.bos_id)."""
  sp = loading.read_tokenizer(directory, model.vocab_size)
  ids = {"bos": (sp.bos_id(), model.bos_id), "eos": (sp.eos_id(), model.eos_id),
         "pad": (sp.pad_id(), model.pad_id)}
  wrong = {name: pair for name, pair in ids.items() if pair[0] != pair[1]}
  if wrong:
    raise CheckpointError(f"{os.path.join(directory, 'tokenizer.model')!r}: special ids "
                          f"(tokenizer, config.json) differ: {wrong}")
  return sp
