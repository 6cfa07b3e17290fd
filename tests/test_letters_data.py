"""The letter task's data: substitution tables, sequence layouts, reading outputs back, and the
strings on which every substitution has to act."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax.letters import data

jax.config.update("jax_numpy_rank_promotion", "raise")


def test_layouts_and_reading_outputs_back():
  x = jnp.array([[0, 12, 12, 0], [2, 26, 0, 0]])  # "AMMA", "C " (+ padding)
  lens = jnp.array([4, 2])
  y = jnp.take(jnp.asarray(data.table(["A>K", "M>B"])), x)
  for layout, text0 in (("aligned", "<s>AKMBMBAK|</s>"), ("concat", "<s>AMMA|KBBK</s>")):
    tok, forced, target = data.build(x, lens, y, layout)
    assert tok.shape == (2, 11) and data.to_text(np.asarray(tok[0])) == text0
    out = data.read_outputs(np.asarray(tok), np.asarray(lens), layout)
    np.testing.assert_array_equal(out[0], np.asarray(y[0]))
    np.testing.assert_array_equal(out[1, :2], np.asarray(y[1, :2]))
  tok, forced, target = data.build(x, lens, y, "aligned")
  assert data.to_text(np.asarray(tok[1])) == "<s>CC  |</s>"
  assert int(target[1].sum()) == 3 and int(forced[1].sum()) == 4
  tok, forced, target = data.build(x, lens, y, "concat")
  np.testing.assert_array_equal(np.asarray(forced[0]), np.arange(11) <= 5)
  np.testing.assert_array_equal(np.asarray(target[1]), (np.arange(11) >= 4) & (np.arange(11) <= 6))


def test_substitutions_and_tables():
  with pytest.raises(ValueError, match="X>Y"):
    data.parse_sub("A>b")
  with pytest.raises(ValueError, match="tuple of substitutions"):
    data.parse_subs("A>B,C>D")  # a comma string is not a tuple
  assert data.parse_subs(("A>B", "C>D")) == ["A>B", "C>D"]
  with pytest.raises(ValueError, match="same letter"):
    data.table(["A>K", "A>B"])
  a, b, c, d = (data.LETTERS.index(ch) for ch in "ABCD")
  tables = data.task_tables("A>B+C>D|C>D")  # a mixture of the joint task and one substitution
  assert tables.shape == (2, data.VOCAB_SIZE)
  assert (tables[0, a], tables[0, c], tables[1, a], tables[1, c]) == (b, d, a, d)
  np.testing.assert_array_equal(data.task_tables("identity")[0], np.arange(data.VOCAB_SIZE))


def test_strings_containing_every_source_letter():
  x = jax.random.randint(jax.random.key(0), (2, 50, 7), 0, 27)
  ln = jax.random.randint(jax.random.key(1), (2, 50), 1, 8)
  got = data.contains_all_sources(x, ln, ["A>B", "C>D"])
  xs, ns = np.asarray(x), np.asarray(ln)
  want = [[{0, 2} <= set(xs[s, b, :ns[s, b]].tolist()) for b in range(50)] for s in range(2)]
  np.testing.assert_array_equal(got, np.array(want))
