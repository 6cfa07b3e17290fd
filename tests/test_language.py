"""The `language` encoding: tokens, random order per draw, bag of counts, config, predict keys."""

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from compgen_jax.encodings import language
from compgen_jax.encodings import registry as encodings
from compgen_jax.students import registry as students
from compgen_jax.types import ConfigError

M = 3


def _cfg(**overrides):
  # A fresh dict: ConfigDict's type safety would refuse the ill-typed values tests feed in.
  return ml_collections.ConfigDict(
      {**encodings.default_config().to_dict(), "name": "language", **overrides})


def _params(**overrides):
  return language.language_init(jax.random.key(0), M, _cfg(**overrides))


APPLY = jax.jit(language.language_apply)


def _pairs(tokens_row) -> list[tuple[int, int]]:
  t = np.asarray(tokens_row, int).reshape(-1, 2)
  return [tuple(p) for p in t if p[0] != language.PAD]


def test_hand_example_in_module_order_without_key():
  enc, cfg = encodings.get("language"), _cfg()
  assert enc.is_sequence and enc.dim(M, cfg, 0) == 2 * M
  V = enc.vocab_size(M, cfg)
  assert V == 1 + M + 11 == encodings.vocab_size(cfg, M)
  tokens = APPLY(_params(), jnp.array([[0.0, 0.55, 1.0]]), None)
  # module 2 with word floor(5.5) = 5 -> id M + 1 + 5; module 3 with word 10; then PAD.
  chex.assert_trees_all_equal(tokens, jnp.array([[2.0, 9.0, 3.0, 14.0, 0.0, 0.0]]))
  assert tokens.dtype == jnp.float32
  # Word ids agree with the reference `tokens` encoding's weight tokens.
  ref = encodings.get("tokens").apply({}, jnp.array([[0.0, 0.55, 1.0]]), None)
  assert float(ref[0, 3]) == 9.0 and float(ref[0, 5]) == 14.0


def test_discrete_weights_get_distinct_words():
  z = jnp.asarray(np.linspace(0.5, 1.0, 6)[None, :], jnp.float32)
  words = np.asarray(language.weight_words(z, jnp.float32(10.0)))[0]
  np.testing.assert_array_equal(words, [5, 6, 7, 8, 9, 10])


def test_random_order_per_draw_keeps_pairs():
  B = 600
  z = jnp.broadcast_to(jnp.array([[0.5, 0.7, 1.0]], jnp.float32), (B, M))
  canonical = _pairs(APPLY(_params(), z[:1], None)[0])
  tokens = np.asarray(APPLY(_params(), z, None, jax.random.key(1)))
  assert tokens.max() < encodings.get("language").vocab_size(M, _cfg())
  orders = set()
  for row in tokens:
    pairs = _pairs(row)
    assert sorted(pairs) == sorted(canonical)  # each name keeps its own weight word
    orders.add(tuple(p[0] for p in pairs))
  assert len(orders) == 6  # every order of 3 modules occurs
  other = np.asarray(APPLY(_params(), z, None, jax.random.key(2)))
  assert not np.array_equal(other, tokens)  # a fresh draw, a fresh order
  # Same key, same order: deterministic.
  chex.assert_trees_all_equal(APPLY(_params(), z, None, jax.random.key(1)), tokens)


def test_shuffle_off_and_padding_last():
  z = jnp.array([[0.0, 0.9, 0.0], [0.6, 0.0, 0.8]], jnp.float32)
  fixed = APPLY(_params(language_shuffle=False), z, None, jax.random.key(3))
  chex.assert_trees_all_equal(fixed, APPLY(_params(), z, None))
  chex.assert_trees_all_equal(fixed[0], jnp.array([2.0, 13.0, 0.0, 0.0, 0.0, 0.0]))
  chex.assert_trees_all_equal(fixed[1], jnp.array([1.0, 10.0, 3.0, 12.0, 0.0, 0.0]))


def test_bag_of_counts_ignores_order_and_pad():
  V = encodings.vocab_size(_cfg(), M)
  z = jnp.array([[0.5, 0.0, 0.5], [0.0, 0.9, 0.0]], jnp.float32)
  a = language.bag_of_counts(APPLY(_params(), z, None, jax.random.key(4)), V)
  b = language.bag_of_counts(APPLY(_params(), z, None), V)
  chex.assert_trees_all_equal(a, b)
  chex.assert_shape(a, (2, V - 1))
  want = np.zeros((2, V - 1))
  want[0, [0, 2]] = 1.0  # module names 1 and 3 (ids shift by one: PAD has no column)
  want[0, M + 5] = 2.0  # the word for 0.5, twice
  want[1, [1, M + 9]] = 1.0
  np.testing.assert_array_equal(np.asarray(a), want)


def test_encode_passes_the_key_to_sequence_encodings_only():
  z = jnp.array([[0.5, 0.7, 1.0]] * 8, jnp.float32)
  ident = encodings.encode("identity", {}, z, None, jax.random.key(0))
  chex.assert_trees_all_equal(ident, z)
  seq = encodings.encode("language", _params(), z, None, jax.random.key(0))
  chex.assert_trees_all_equal(seq, APPLY(_params(), z, None, jax.random.key(0)))
  assert encodings.vocab_size(encodings.default_config(), M) == 0


def test_students_read_sequences_their_way():
  V, L, I, O = encodings.vocab_size(_cfg(), M), 2 * M, 4, 2
  tokens = APPLY(_params(), jnp.array([[0.5, 0.0, 1.0]], jnp.float32), None)
  x = jnp.zeros((1, 3, I), jnp.float32)
  for name, enc_param in (("mlp", ("dense_0", "kernel")),
                          ("hypernetwork", ("generator", "kernel"))):
    cfg = students.default_config()
    cfg.name = name
    cfg.mlp.update(width=8, depth=1)
    cfg.hypernetwork.hidden = 4
    params = students.init_params(cfg, jax.random.key(0), L, I, O, vocab_size=V)
    rows = params[enc_param[0]][enc_param[1]].shape[0]
    assert rows == (V - 1) + (I if name == "mlp" else 0)  # bag of counts, not L token ids
    y, _ = students.apply_student(cfg, params, tokens, x, O, vocab_size=V)
    chex.assert_shape(y, (1, 3, O))
  cfg = students.default_config()
  cfg.name = "transformer"
  cfg.transformer.update(num_layers=1, d_model=8, num_heads=2, ffw_dim=8)
  params = students.init_params(cfg, jax.random.key(0), L, I, O, vocab_size=V)
  assert params["enc_embed"]["embedding"].shape == (V, 8)
  y, _ = students.apply_student(cfg, params, tokens, x, O, vocab_size=V)
  chex.assert_shape(y, (1, 3, O))


@pytest.mark.parametrize("overrides, field", [
    (dict(language_bins=0), "encoding.language_bins"),
    (dict(language_shuffle="yes"), "encoding.language_shuffle"),
])
def test_validate(overrides, field):
  encodings.validate(_cfg())
  with pytest.raises(ConfigError) as err:
    encodings.validate(_cfg(**overrides))
  assert err.value.field == field
