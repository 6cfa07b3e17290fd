"""The model adapter, the letter transformer's KV cache and padding, and the shared attention
(RoPE, masks, masked softmax attention) against independent numpy versions."""

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import traverse_util

from compgen_jax.lm import attention, model, transformer

jax.config.update("jax_numpy_rank_promotion", "raise")

V, BOS, EOS, PAD = 11, 8, 9, 10


def _lm(positions="rotary", tie_head=False, num_heads=2):
  cfg = ml_collections.ConfigDict(dict(width=16, num_layers=2, num_heads=num_heads, mlp_ratio=2,
                                       positions=positions, max_len=32, tie_head=tie_head))
  return transformer.make_lm(cfg, V, bos_id=BOS, eos_id=EOS, pad_id=PAD)


def _three_ways(m):
  """Logits [B, T, V] of a teacher-forced pass, of one token at a time through the cache (a
  scan), and of a 5-token prefill then the rest: one jitted program."""

  def run(params, tokens_BxT, valid_BxT):
    full = model.forward(m, params, tokens_BxT, valid_BxT)
    batch, length = tokens_BxT.shape

    def step(cache, tv):
      logits, cache = m.apply(params, tv[0][:, None], cache, tv[1][:, None])
      return cache, logits[:, 0]

    cache, steps_TxBxV = jax.lax.scan(step, m.init_cache(batch, length + 3),
                                      (tokens_BxT.T, valid_BxT.T))
    prefill, part = m.apply(params, tokens_BxT[:, :5], m.init_cache(batch, length),
                            valid_BxT[:, :5])
    rest, _ = m.apply(params, tokens_BxT[:, 5:], part, valid_BxT[:, 5:])
    return full, jnp.swapaxes(steps_TxBxV, 0, 1), jnp.concatenate([prefill, rest], 1), cache

  return jax.jit(run)


@pytest.mark.parametrize("positions,tie_head", [("rotary", False), ("learned", True)])
def test_kv_cache_and_prefill_equal_full_forward_and_padding_is_invisible(positions, tie_head):
  m = _lm(positions, tie_head)
  params = m.init(jax.random.key(0))
  tokens = jax.random.randint(jax.random.key(1), (3, 9), 0, V)
  # three tokens of left padding, and one more mid-sequence in row 1
  valid = (jnp.arange(9)[None] >= 3).repeat(3, 0).at[1, 6].set(False)
  run = _three_ways(m)
  full, steps, chunked, cache = run(params, tokens, valid)
  chex.assert_trees_all_close(steps, full, atol=1e-4)
  chex.assert_trees_all_close(chunked, full, atol=1e-4)
  assert int(cache["index"]) == 9
  seen, _, _, _ = run(params, tokens, jnp.ones_like(valid))  # unmasked, the padding is seen
  assert float(jnp.abs(seen[:, 3:] - full[:, 3:]).max()) > 1e-3
  if positions == "rotary":  # relative positions: the padded rows 0, 2 equal them unpadded
    alone = jax.jit(lambda p, t: model.forward(m, p, t))(params, tokens[::2, 3:])
    chex.assert_trees_all_close(full[::2, 3:], alone, atol=1e-5)


def test_uniform_model_and_one_vocabulary():
  m = _lm()
  tokens = jax.random.randint(jax.random.key(6), (2, 7), 0, V)
  u = model.uniform_model(m)
  assert (u.vocab_size, u.eos_id, u.pad_id, u.init) == (V, EOS, PAD, None)
  logits, _ = u.apply(None, tokens, u.init_cache(2, 10), jnp.ones(tokens.shape, bool))
  chex.assert_trees_all_close(jax.nn.log_softmax(logits), jnp.full((2, 7, V), -np.log(V)))
  model.same_vocabulary([m, u, model.full_forward_model(m)])
  with pytest.raises(ValueError, match="disagree"):
    model.same_vocabulary([m, m._replace(eos_id=3)])


def test_rope_relative_position():
  rng = np.random.default_rng(0)
  q = jnp.asarray(rng.normal(size=(1, 1, 1, 8)), jnp.float32)
  k = jnp.asarray(rng.normal(size=(1, 1, 1, 8)), jnp.float32)

  def score(m, n):
    qm = attention.rope(q, jnp.array([m]), 10_000.0)
    kn = attention.rope(k, jnp.array([n]), 10_000.0)
    return float(jnp.sum(qm * kn))

  for m, n, shift in ((3, 1, 5), (0, 7, 11), (4, 4, 2)):
    np.testing.assert_allclose(score(m + shift, n + shift), score(m, n), rtol=1e-4, atol=1e-5)
  assert abs(score(3, 1) - score(1, 3)) > 1e-3  # the relative offset itself matters
  # A rotation: norms are kept.
  rotated = attention.rope(q, jnp.array([9]), 10_000.0)
  np.testing.assert_allclose(jnp.linalg.norm(rotated), jnp.linalg.norm(q), rtol=1e-5)


def _np_attend(q, k, v, mask):
  """float64: softmax over allowed keys of q.k / sqrt(K), times v; [B, Q, H, K]."""
  q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
  s = np.einsum("bqhk,bshk->bhqs", q, k) / np.sqrt(q.shape[-1])
  s = np.where(np.asarray(mask)[:, None], s, -np.inf)
  w = np.exp(s - s.max(-1, keepdims=True))
  return np.einsum("bhqs,bshk->bqhk", w / w.sum(-1, keepdims=True), v)


@pytest.mark.parametrize("num_queries", [1, 4])
def test_attend_equals_numpy_and_masks(num_queries):
  kq, kk, kv = jax.random.split(jax.random.key(7), 3)
  q = jax.random.normal(kq, (2, num_queries, 3, 4))
  k, v = jax.random.normal(kk, (2, 6, 3, 4)), jax.random.normal(kv, (2, 6, 3, 4))
  valid = jnp.array([[True] * 6, [True, False, True, True, False, True]])
  pos_Q = jnp.arange(6 - num_queries, 6) if num_queries > 1 else jnp.array([3])
  mask = attention.attention_mask(valid, pos_Q)
  causal_QxS = np.asarray(pos_Q)[:, None] >= np.arange(6)[None]
  self_QxS = np.asarray(pos_Q)[:, None] == np.arange(6)[None]
  np.testing.assert_array_equal(mask[0], causal_QxS)
  np.testing.assert_array_equal(mask[1], causal_QxS & (np.asarray(valid[1])[None] | self_QxS))
  np.testing.assert_allclose(attention.attend(q, k, v, mask), _np_attend(q, k, v, mask),
                             rtol=1e-5, atol=1e-6)
  everything = attention.attention_mask(valid.at[1].set(True), pos_Q, causal=False)
  assert bool(everything.all())


def test_gpt2_init_follows_hugging_face_init_weights():
  """model.init='gpt2' (HF GPT2PreTrainedModel._init_weights): every kernel and embedding
  N(0, 0.02), the residual output projections N(0, 0.02 / sqrt(2 num_layers)), biases 0,
  LayerNorm scales 1. Each leaf's sample std is within 5 standard errors (std / sqrt(2n)) of
  the formula's, its mean within 5 std / sqrt(n) of 0; flax's default embeddings are
  1/sqrt(width) instead."""
  def lm(init):
    cfg = ml_collections.ConfigDict(dict(width=64, num_layers=2, num_heads=2, mlp_ratio=4,
                                         positions="learned", max_len=64, tie_head=False,
                                         init=init))
    return transformer.make_lm(cfg, V, bos_id=BOS, eos_id=EOS, pad_id=PAD)

  params = lm("gpt2").init(jax.random.key(0))
  flat = traverse_util.flatten_dict(jax.device_get(params))
  scaled = 0
  for path, a in flat.items():
    a = np.asarray(a, np.float64)
    if path[-1] == "bias":
      assert np.all(a == 0), path
    elif path[-1] == "scale":
      assert np.all(a == 1), path
    else:
      want = 0.02 / np.sqrt(2 * 2) if path[-2] in ("attn_out", "mlp_out") else 0.02
      scaled += want < 0.02
      n = a.size
      assert abs(a.std() / want - 1) < 5 / np.sqrt(2 * n), (path, a.std(), want)
      assert abs(a.mean()) < 5 * want / np.sqrt(n), path
  assert scaled == 4  # attn_out and mlp_out of both blocks
  assert {p[0] for p in flat} >= {"embed", "pos_embed", "head", "block_0", "block_1"}
  flax_pos = np.asarray(lm("flax").init(jax.random.key(0))["pos_embed"]["embedding"])
  assert abs(flax_pos.std() * np.sqrt(64) - 1) < 5 / np.sqrt(2 * flax_pos.size)
  again = lm("gpt2").init(jax.random.key(0))
  chex.assert_trees_all_equal(again, params)
  other = lm("gpt2").init(jax.random.key(1))
  assert not np.allclose(other["embed"]["embedding"], params["embed"]["embedding"])
  with pytest.raises(ValueError, match="init"):
    lm("xavier")
