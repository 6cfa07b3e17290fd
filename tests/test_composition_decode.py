"""The LM's KV-cache path, jitted composed decoding, and the letter sequence layouts."""

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from compgen_jax.composition import decode, diagnostics, evaluate, letters, lm

jax.config.update("jax_numpy_rank_promotion", "raise")

V = letters.VOCAB_SIZE


def _model(positions="rotary", tie_head=False):
  cfg = ml_collections.ConfigDict(dict(width=16, num_layers=2, num_heads=2, mlp_ratio=2,
                                       positions=positions, max_len=32, tie_head=tie_head))
  return lm.make_lm(cfg, V)


@pytest.mark.parametrize("positions,tie_head", [("rotary", False), ("learned", True)])
def test_kv_cache_steps_equal_full_forward(positions, tie_head):
  model = _model(positions, tie_head)
  params = model.init(jax.random.key(0))
  tokens = jax.random.randint(jax.random.key(1), (3, 9), 0, V)
  full = model.forward(params, tokens)
  cache, steps = model.init_cache(3, 12), []
  for t in range(9):
    logits, cache = model.step(params, tokens[:, t], cache)
    steps.append(logits)
  chex.assert_trees_all_close(jnp.stack(steps, axis=1), full, atol=1e-4)
  assert int(cache["index"]) == 9


def _prompts(batch=4, n=5, layout="aligned"):
  x = letters.sample_inputs(jax.random.key(2), batch, n)
  lens = jnp.array([5, 3, 1, 4])[:batch]
  return letters.build(x, lens, x, layout)


@pytest.mark.parametrize("greedy", [True, False])
def test_kv_cache_decoding_equals_full_forward_decoding(greedy):
  model = _model()
  keys = jax.random.split(jax.random.key(3), 3)
  params = tuple(model.init(k) for k in keys)
  tokens, forced, _ = _prompts(layout="concat")
  models = (model,) * 3
  slow_models = (lm.full_forward_model(model),) * 3
  kw = dict(eos_id=letters.EOS, pad_id=letters.PAD, greedy=greedy)
  lam, key = jnp.array([1.0, 0.5]), jax.random.key(4)
  fast = jax.jit(lambda p: decode.decode(models, p, tokens, forced, lam, 1.0, key, **kw))(params)
  slow = jax.jit(lambda p: decode.decode(slow_models, p, tokens, forced, lam, 1.0, key, **kw))(
      params)
  np.testing.assert_array_equal(fast.tokens_BxT, slow.tokens_BxT)
  chex.assert_trees_all_close(fast.log_z_BxT, slow.log_z_BxT, atol=1e-4)
  np.testing.assert_array_equal(np.asarray(fast.tokens_BxT)[np.asarray(forced)],
                                np.asarray(tokens)[np.asarray(forced)])


def _eos_after_model(stop_offset: int) -> lm.Model:
  """Emits letter 1 until position (first token + stop_offset), then EOS: a planted stop."""

  def step(params, tokens_B, cache):
    del params
    first = jnp.where(cache["index"] == 0, tokens_B, cache["first"])
    stop = cache["index"] + 1 >= first + stop_offset
    logits = jnp.where(stop[:, None], jax.nn.one_hot(letters.EOS, V)[None],
                       jax.nn.one_hot(1, V)[None]) * 10.0
    return logits, {"index": cache["index"] + 1, "first": first}

  init_cache = lambda b, t: {"index": jnp.zeros((), jnp.int32), "first": jnp.zeros((b,),
                                                                                  jnp.int32)}
  return lm.Model(forward=None, init_cache=init_cache, step=step)


def test_decoding_stops_per_sequence_at_eos():
  model = _eos_after_model(stop_offset=0)
  first = jnp.array([3, 6, 2])  # the EOS position of each sequence
  forced = jnp.zeros((3, 12), jnp.int32).at[:, 0].set(first)
  mask = jnp.zeros((3, 12), bool).at[:, 0].set(True)
  out = jax.jit(lambda: decode.decode((model,), (None,), forced, mask, eos_id=letters.EOS,
                                      pad_id=letters.PAD))()
  toks = np.asarray(out.tokens_BxT)
  for b, e in enumerate(np.asarray(first)):
    assert toks[b, e] == letters.EOS
    assert np.all(toks[b, 1:e] == 1) and np.all(toks[b, e + 1:] == letters.PAD)
  assert np.all(np.asarray(out.done_B))
  assert int(out.num_steps) == 6  # stopped at the last EOS, not at the buffer end (11)
  np.testing.assert_array_equal(np.asarray(out.generated_BxT).sum(1), np.asarray(first))


def test_composed_eos_stops_and_experts_equal_to_background_change_nothing():
  model = _model()
  pb, p1 = model.init(jax.random.key(5)), model.init(jax.random.key(6))
  tokens, forced, _ = _prompts()
  kw = dict(eos_id=letters.EOS, pad_id=letters.PAD)
  alone = decode.decode((model,), (p1,), tokens, forced, **kw)
  composed = decode.decode((model,) * 3, (pb, p1, pb), tokens, forced, **kw)
  np.testing.assert_array_equal(alone.tokens_BxT, composed.tokens_BxT)
  np.testing.assert_allclose(composed.log_z_BxT, 0.0, atol=1e-5)
  over_uniform = decode.decode((lm.uniform_model(V), model), (None, p1), tokens, forced, **kw)
  np.testing.assert_array_equal(alone.tokens_BxT, over_uniform.tokens_BxT)


def test_layouts():
  x = jnp.array([[0, 12, 12, 0], [2, 26, 0, 0]])  # "AMMA", "C " (+ padding)
  lens = jnp.array([4, 2])
  y = jnp.take(jnp.asarray(letters.table(["A>K", "M>B"])), x)
  tok, forced, target = letters.build(x, lens, y, "aligned")
  assert letters.to_text(np.asarray(tok[0])) == "<s>AKMBMBAK|</s>"
  assert letters.to_text(np.asarray(tok[1])) == "<s>CC  |</s>"
  assert tok.shape == (2, 11) and int(target[1].sum()) == 3 and int(forced[1].sum()) == 4
  tok, forced, target = letters.build(x, lens, y, "concat")
  assert letters.to_text(np.asarray(tok[0])) == "<s>AMMA|KBBK</s>"
  np.testing.assert_array_equal(np.asarray(forced[0]), np.arange(11) <= 5)
  np.testing.assert_array_equal(np.asarray(target[1]), (np.arange(11) >= 4) & (np.arange(11) <= 6))
  with pytest.raises(ValueError, match="X>Y"):
    letters.parse_sub("A>b")


def _fixed_model(logits_V) -> lm.Model:
  """The same next-token logits at every step (no params): a planted distribution."""
  logits_V = jnp.asarray(logits_V, jnp.float32)

  def forward(params, tokens_BxT):
    del params
    return jnp.broadcast_to(logits_V, tokens_BxT.shape + logits_V.shape)

  def step(params, tokens_B, cache):
    del params
    return jnp.broadcast_to(logits_V, tokens_B.shape + logits_V.shape), cache

  return lm.Model(forward=forward, init_cache=lambda b, t: (), step=step)


def test_models_with_minus_inf_logits_decode_to_finite_log_z():
  base = np.linspace(-1.0, 1.0, V)
  zero_in_bg, zero_in_expert = 5, 9  # the background rules out 5, the expert 9
  bg = _fixed_model(np.where(np.arange(V) == zero_in_bg, -np.inf, base))
  expert = _fixed_model(np.where(np.arange(V) == zero_in_expert, -np.inf, base[::-1]))
  tokens, forced, _ = _prompts(layout="concat")
  out = decode.decode((bg, expert), (None, None), tokens, forced, eos_id=letters.EOS,
                      pad_id=letters.PAD)
  # one expert at lambda 1 is the expert itself (also where p_b = 0): log Z_t = log 1 = 0, up
  # to float32 rounding at the clamp's scale (1e4), and the same tokens as the expert alone
  log_z = np.asarray(out.log_z_BxT)
  np.testing.assert_allclose(log_z, 0.0, atol=1e-3)
  alone = decode.decode((expert,), (None,), tokens, forced, eos_id=letters.EOS,
                        pad_id=letters.PAD)
  np.testing.assert_array_equal(out.tokens_BxT, alone.tokens_BxT)
  assert not np.any(np.asarray(out.tokens_BxT)[np.asarray(out.generated_BxT)] == zero_in_expert)
  logp = decode.teacher_forced_logps((bg, expert), (None, None), out.tokens_BxT)
  d = diagnostics.diagnose(logp[0], logp[1:], out.generated_BxT)
  for k, v in d.items():
    assert np.all(np.isfinite(np.asarray(v, np.float64)) | (k == "ortho_cos_KxK")), k


def test_sampling_draws_fresh_keys_in_every_chunk():
  # 8 copies of one prompt decoded in 2 chunks of 4 from the uniform model: with one key for
  # every chunk, chunk 2 repeated chunk 1's draws exactly.
  x = jnp.zeros((1, 8, 6), jnp.int32)
  ref, forced, _ = evaluate.references(x, jnp.full((1, 8), 6), letters.table([]), "aligned")
  cfg = ml_collections.ConfigDict(dict(compose=dict(greedy=False, temperature=1.0,
                                                    eval_batch=4)))
  tokens = evaluate.decode_all(cfg, (lm.uniform_model(V),), (None,), ref, forced,
                               seed_keys_S=jax.random.key(0)[None])
  gen = ~np.asarray(forced[0])
  first, second = tokens[0, :4][:, gen[0]], tokens[0, 4:][:, gen[0]]
  assert not np.array_equal(first, second)
  # and every generated token is a draw from the uniform model: all ids occur, none dominates
  first_tok = tokens[0, :, 2]
  assert len(np.unique(first_tok)) >= 6
