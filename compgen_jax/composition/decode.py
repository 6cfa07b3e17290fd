"""Batched, jitted decoding of a composed model: each model keeps its own cache.

Decoding runs over a token buffer [B, T]. Positions where `forced_mask` is set take the forced
token (a prompt, or the input letters of an interleaved layout); every other position takes the
composed choice until that sequence has emitted EOS, after which it is padded. The loop is a
`lax.while_loop` that ends once every sequence is done or the buffer is full. Models are seen
only through the `lm.model.Model` adapter, and must share one vocabulary (EOS and PAD included).
"""

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp

from compgen_jax.composition import compose, rules, sampling
from compgen_jax.composition.spec import NO_TRUNCATION, PAPER, Spec, Truncation
from compgen_jax.lm.model import Model, forward, same_vocabulary
from compgen_jax.types import Array, PRNGKey, PyTree


class Decoded(NamedTuple):
  tokens_BxT: Array     # forced + generated tokens, pad after EOS
  done_B: Array         # emitted EOS before the buffer ended
  log_z_BxT: Array      # log Z_t at generated positions (0 elsewhere)
  generated_BxT: Array  # True where the position was generated (not forced, not padding)
  num_steps: Array      # loop iterations run (< T - 1 when all sequences stopped early)


def decode(models: Sequence[Model], params: Sequence[PyTree], forced_BxT: Array,
           forced_mask_BxT: Array, lam_K: Array | None = None, temperature: float | Array = 1.0,
           key: PRNGKey | None = None, *, greedy: bool = True, spec: Spec = PAPER,
           trunc: Truncation = NO_TRUNCATION) -> Decoded:
  """Decodes the composition of models[0] (background) with models[1:] (experts).

  With one model this is plain decoding of that model. Each step is `rules.step` under
  `spec`. Greedy takes the composed argmax; otherwise tokens are sampled at `temperature`
  after `trunc`, row b from fold_in(key, b) (or key[b] for B keys), folded in by position.
  Position 0 must be forced (the first token every model is fed).
  """
  same_vocabulary(models)
  eos_id, pad_id = models[0].eos_id, models[0].pad_id
  batch, max_len = forced_BxT.shape
  num_experts = len(models) - 1
  lam_K = compose.weights(spec.operator, lam_K, num_experts)
  if not greedy and key is None:
    raise ValueError("sampling needs a key")
  keys_B = None if greedy else sampling.row_keys(key, batch)
  tokens_BxT = jnp.where(forced_mask_BxT, forced_BxT, pad_id).astype(jnp.int32)
  caches = tuple(m.init_cache(batch, max_len) for m in models)

  def cond(carry):
    t, _, _, done_B, _, _ = carry
    return (t < max_len - 1) & ~jnp.all(done_B)

  def body(carry):
    t, tokens_BxT, caches, done_B, log_z_BxT, gen_BxT = carry
    tok_Bx1 = jax.lax.dynamic_slice_in_dim(tokens_BxT, t, 1, axis=1)
    # a done sequence is fed padding from here on: not a token to attend to
    valid_Bx1 = ~done_B[:, None] | (tok_Bx1 != pad_id)
    outs = [m.apply(p, tok_Bx1, c, valid_Bx1)
            for m, p, c in zip(models, params, caches, strict=True)]
    logp = [jax.nn.log_softmax(logits_Bx1xV[:, 0].astype(jnp.float32), axis=-1)
            for logits_Bx1xV, _ in outs]
    experts_KxBxV = jnp.stack(logp[1:]) if num_experts else jnp.zeros((0,) + logp[0].shape)
    logp_BxV, log_z_B = rules.step(jnp.concatenate([logp[0][None], experts_KxBxV]), lam_K,
                                   spec, eos_id)
    next_B = sampling.pick(logp_BxV, keys_B, t, greedy, temperature, trunc)
    forced_next_B = jax.lax.dynamic_index_in_dim(forced_mask_BxT, t + 1, 1, keepdims=False)
    forced_tok_B = jax.lax.dynamic_index_in_dim(forced_BxT, t + 1, 1, keepdims=False)
    generate_B = ~forced_next_B & ~done_B
    write_B = jnp.where(forced_next_B, forced_tok_B, jnp.where(done_B, pad_id, next_B))
    tokens_BxT = jax.lax.dynamic_update_index_in_dim(
        tokens_BxT, write_B.astype(jnp.int32), t + 1, 1)
    log_z_BxT = jax.lax.dynamic_update_index_in_dim(
        log_z_BxT, jnp.where(generate_B, log_z_B, 0.0), t + 1, 1)
    gen_BxT = jax.lax.dynamic_update_index_in_dim(gen_BxT, generate_B, t + 1, 1)
    done_B = done_B | (generate_B & (next_B == eos_id))
    return t + 1, tokens_BxT, tuple(c for _, c in outs), done_B, log_z_BxT, gen_BxT

  init = (jnp.zeros((), jnp.int32), tokens_BxT, caches, jnp.zeros((batch,), bool),
          jnp.zeros((batch, max_len), jnp.float32), jnp.zeros((batch, max_len), bool))
  t, tokens_BxT, _, done_B, log_z_BxT, gen_BxT = jax.lax.while_loop(cond, body, init)
  return Decoded(tokens_BxT, done_B, log_z_BxT, gen_BxT, t)


def teacher_forced_logps(models: Sequence[Model], params: Sequence[PyTree], tokens_BxT: Array,
                         valid_BxT: Array | None = None) -> Array:
  """Each model's next-token log-probs on given sequences: [num_models, B, T, V] (every token
  valid unless `valid_BxT` says otherwise)."""
  same_vocabulary(models)
  return jnp.stack([
      jax.nn.log_softmax(forward(m, p, tokens_BxT, valid_BxT).astype(jnp.float32), axis=-1)
      for m, p in zip(models, params, strict=True)])
