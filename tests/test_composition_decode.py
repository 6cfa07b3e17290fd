"""Jitted composed decoding through the model adapter: KV cache vs full forward, stopping at EOS,
the operator's identities, and models that rule tokens out."""

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from compgen_jax.composition import decode, diagnostics
from compgen_jax.lm import model as lm_model
from compgen_jax.lm import transformer

jax.config.update("jax_numpy_rank_promotion", "raise")

V, BOS, SEP, EOS, PAD = 12, 8, 9, 10, 11  # tokens 0..7 are letters
IDS = dict(bos_id=BOS, eos_id=EOS, pad_id=PAD)


def _model():
  cfg = ml_collections.ConfigDict(dict(width=16, num_layers=2, num_heads=2, mlp_ratio=2,
                                       positions="rotary", max_len=32, tie_head=False))
  return transformer.make_lm(cfg, V, **IDS)


def _prompts(lens=(5, 3, 1, 4), n=5, interleaved=False):
  """Forced tokens and mask, each [B, 2n + 3]: a prompt BOS x SEP followed by free positions,
  or (interleaved) BOS x1 _ x2 _ .. xn _ SEP with a free position after every x."""
  x = np.asarray(jax.random.randint(jax.random.key(2), (len(lens), n), 0, 8))
  tokens = np.full((len(lens), 2 * n + 3), PAD, np.int32)
  forced = np.zeros(tokens.shape, bool)
  for b, ln in enumerate(lens):
    pos = 1 + 2 * np.arange(ln) if interleaved else 1 + np.arange(ln)
    sep = 2 * ln + 1 if interleaved else ln + 1
    tokens[b, 0], tokens[b, pos], tokens[b, sep] = BOS, x[b, :ln], SEP
    forced[b, [0, *pos, sep]] = True
  return jnp.asarray(tokens), jnp.asarray(forced)


@pytest.mark.parametrize("greedy,interleaved", [(True, False), (False, True)])
def test_kv_cache_decoding_equals_full_forward_decoding(greedy, interleaved):
  model = _model()
  keys = jax.random.split(jax.random.key(3), 3)
  params = tuple(model.init(k) for k in keys)
  tokens, forced = _prompts(interleaved=interleaved)
  models = (model,) * 3
  slow_models = (lm_model.full_forward_model(model),) * 3
  lam, key = jnp.array([1.0, 0.5]), jax.random.key(4)
  fast = jax.jit(lambda p: decode.decode(models, p, tokens, forced, lam, 1.0, key,
                                         greedy=greedy))(params)
  slow = jax.jit(lambda p: decode.decode(slow_models, p, tokens, forced, lam, 1.0, key,
                                         greedy=greedy))(params)
  np.testing.assert_array_equal(fast.tokens_BxT, slow.tokens_BxT)
  chex.assert_trees_all_close(fast.log_z_BxT, slow.log_z_BxT, atol=1e-4)
  np.testing.assert_array_equal(np.asarray(fast.tokens_BxT)[np.asarray(forced)],
                                np.asarray(tokens)[np.asarray(forced)])


def _eos_after_model() -> lm_model.Model:
  """Emits token 1 until position (first token), then EOS: a planted stop."""

  def apply(params, tokens_Bx1, cache, valid_Bx1):
    del params, valid_Bx1
    first = jnp.where(cache["index"] == 0, tokens_Bx1[:, 0], cache["first"])
    stop = cache["index"] + 1 >= first
    logits = jnp.where(stop[:, None], jax.nn.one_hot(EOS, V)[None],
                       jax.nn.one_hot(1, V)[None]) * 10.0
    return logits[:, None], {"index": cache["index"] + 1, "first": first}

  def init_cache(batch, max_len):
    del max_len
    return {"index": jnp.zeros((), jnp.int32), "first": jnp.zeros((batch,), jnp.int32)}

  return lm_model.Model(apply=apply, init_cache=init_cache, vocab_size=V, **IDS,
                        positions_count="slots")


def test_decoding_stops_per_sequence_at_eos():
  model = _eos_after_model()
  first = jnp.array([3, 6, 2])  # the EOS position of each sequence
  forced = jnp.zeros((3, 12), jnp.int32).at[:, 0].set(first)
  mask = jnp.zeros((3, 12), bool).at[:, 0].set(True)
  out = jax.jit(lambda: decode.decode((model,), (None,), forced, mask))()
  toks = np.asarray(out.tokens_BxT)
  for b, e in enumerate(np.asarray(first)):
    assert toks[b, e] == EOS
    assert np.all(toks[b, 1:e] == 1) and np.all(toks[b, e + 1:] == PAD)
  assert np.all(np.asarray(out.done_B))
  assert int(out.num_steps) == 6  # stopped at the last EOS, not at the buffer end (11)
  np.testing.assert_array_equal(np.asarray(out.generated_BxT).sum(1), np.asarray(first))
  with pytest.raises(ValueError, match="disagree"):  # one vocabulary for every model
    decode.decode((model, model._replace(pad_id=0)), (None, None), forced, mask)


def test_composed_eos_stops_and_experts_equal_to_background_change_nothing():
  model = _model()
  pb, p1 = model.init(jax.random.key(5)), model.init(jax.random.key(6))
  tokens, forced = _prompts(interleaved=True)
  alone = decode.decode((model,), (p1,), tokens, forced)
  composed = decode.decode((model,) * 3, (pb, p1, pb), tokens, forced)
  np.testing.assert_array_equal(alone.tokens_BxT, composed.tokens_BxT)
  np.testing.assert_allclose(composed.log_z_BxT, 0.0, atol=1e-5)
  over_uniform = decode.decode((lm_model.uniform_model(model), model), (None, p1), tokens,
                               forced)
  np.testing.assert_array_equal(alone.tokens_BxT, over_uniform.tokens_BxT)


def _fixed_model(logits_V) -> lm_model.Model:
  """The same next-token logits at every step (no params): a planted distribution."""
  logits_V = jnp.asarray(logits_V, jnp.float32)

  def apply(params, tokens_BxL, cache, valid_BxL):
    del params, valid_BxL
    return jnp.broadcast_to(logits_V, tokens_BxL.shape + logits_V.shape), cache

  return lm_model.Model(apply=apply, init_cache=lambda b, t: (), vocab_size=V, **IDS,
                        positions_count="tokens")


def test_models_with_minus_inf_logits_decode_to_finite_log_z():
  base = np.linspace(-1.0, 1.0, V)
  zero_in_bg, zero_in_expert = 5, 9  # the background rules out 5, the expert 9
  bg = _fixed_model(np.where(np.arange(V) == zero_in_bg, -np.inf, base))
  expert = _fixed_model(np.where(np.arange(V) == zero_in_expert, -np.inf, base[::-1]))
  tokens, forced = _prompts()
  out = decode.decode((bg, expert), (None, None), tokens, forced)
  # one expert at lambda 1 is the expert itself (also where p_b = 0): log Z_t = log 1 = 0, up
  # to float32 rounding at the clamp's scale (1e4), and the same tokens as the expert alone
  log_z = np.asarray(out.log_z_BxT)
  np.testing.assert_allclose(log_z, 0.0, atol=1e-3)
  alone = decode.decode((expert,), (None,), tokens, forced)
  np.testing.assert_array_equal(out.tokens_BxT, alone.tokens_BxT)
  assert not np.any(np.asarray(out.tokens_BxT)[np.asarray(out.generated_BxT)] == zero_in_expert)
  logp = decode.teacher_forced_logps((bg, expert), (None, None), out.tokens_BxT)
  d = diagnostics.diagnose(logp[0], logp[1:], out.generated_BxT)
  for k, v in d.items():
    assert np.all(np.isfinite(np.asarray(v, np.float64)) | (k == "ortho_cos_KxK")), k
