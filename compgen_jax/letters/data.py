"""The letter-substitution task: vocabulary, substitution tables, sequence layouts.

Inputs are strings over 26 capital letters and space. A task is a set of substitution tables
(one table: a deterministic map; several: a mixture, one table drawn per example). Task names:
  "identity"         copy the input
  "A>B"              substitute one letter
  "A>B+C>D"          both substitutions at once (joint)
  "A>B|C>D"          a mixture of the two single-substitution tasks
Layouts put input x and output y in one causal sequence (T = 2 * max_len + 3):
  aligned  BOS x1 y1 x2 y2 ... xn yn SEP EOS  (y_t is predicted right after seeing x_t)
  concat   BOS x1 .. xn SEP y1 .. yn EOS      (standard input-then-output)
or side by side (T = 2 * max_len):
  position x1 .. xn | y1 .. yn: the authors' transducer. The model reads x only and its output
           at input position t is y_t (no shift, no BOS/SEP/EOS, nothing fed back); the
           vocabulary is the 27 symbols. The sequence keeps y next to x so that decoded and
           reference sequences compare the same way in every layout.
"""

import string
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from compgen_jax.types import Array, PRNGKey

LETTERS = string.ascii_uppercase
SYMBOLS = LETTERS + " "          # the input alphabet, ids 0..26
BOS, SEP, EOS, PAD = 27, 28, 29, 30
VOCAB_SIZE = 31
LAYOUTS = ("aligned", "concat", "position")
SHIFTED = ("aligned", "concat")  # next-token layouts; "position" reads outputs in place


def vocab_size(layout: str) -> int:
  """The model's vocabulary: the symbols and specials, or the 27 symbols alone ('position')."""
  return len(SYMBOLS) if layout == "position" else VOCAB_SIZE


def seq_len(layout: str, max_len: int) -> int:
  """Tokens one model reads for strings of max_len letters (its positional extent)."""
  return max_len if layout == "position" else 2 * max_len + 3


def parse_sub(sub: str) -> tuple[int, int]:
  """'A>B' -> (0, 1); ValueError naming the allowed letters otherwise."""
  parts = sub.split(">") if isinstance(sub, str) else []
  if len(parts) != 2 or any(len(p) != 1 or p not in LETTERS for p in parts):
    raise ValueError(f"substitution {sub!r} is not 'X>Y' with X, Y in {LETTERS}")
  return LETTERS.index(parts[0]), LETTERS.index(parts[1])


def parse_subs(subs: Sequence[str]) -> list[str]:
  """('A>B', 'C>D') -> ['A>B', 'C>D'], each validated (ValueError naming the allowed letters)."""
  if isinstance(subs, str):  # a lone string is not a sequence of substitutions
    raise ValueError(f"{subs!r} is not a tuple of substitutions like ('A>B', 'C>D')")
  for s in subs:
    parse_sub(s)
  return list(subs)


def conflicting(subs: list[str]) -> bool:
  """True when two substitutions rewrite the same letter (A>K with A>B): no single table."""
  srcs = [parse_sub(s)[0] for s in subs]
  return len(set(srcs)) < len(srcs)


def table(subs: list[str]) -> np.ndarray:
  """The map over the vocabulary applying all `subs` at once (specials map to themselves).

  ValueError for conflicting substitutions: 'apply both' is undefined there.
  """
  if conflicting(subs):
    raise ValueError(f"substitutions {subs} rewrite the same letter: no single table")
  t = np.arange(VOCAB_SIZE, dtype=np.int32)
  for s in subs:
    src, dst = parse_sub(s)
    t[src] = dst
  return t


def contains_all_sources(x_SxBxN, len_SxB, subs: list[str]) -> np.ndarray:
  """[S, B] True where the string (its first len letters) contains every source letter of subs:
  the strings on which every substitution has to act."""
  x, n = np.asarray(x_SxBxN), np.asarray(len_SxB)
  in_string = np.arange(x.shape[-1]) < n[..., None]
  out = np.ones(x.shape[:-1], bool)
  for s in subs:
    out &= np.any((x == parse_sub(s)[0]) & in_string, axis=-1)
  return out


def task_tables(name: str) -> np.ndarray:
  """[P, V] tables of a task name (see module docstring)."""
  if name == "identity":
    return table([])[None]
  return np.stack([table(comp.split("+")) for comp in name.split("|")])


def joint_name(subs: list[str]) -> str:
  return "+".join(subs)


def mixture_name(subs: list[str]) -> str:
  return "|".join(subs)


def sample_inputs(key: PRNGKey, num: int, max_len: int) -> Array:
  """Uniform strings over SYMBOLS: [num, max_len] int32."""
  return jax.random.randint(key, (num, max_len), 0, len(SYMBOLS), dtype=jnp.int32)


def build(x_BxN: Array, len_B: Array, y_BxN: Array, layout: str) -> tuple[Array, Array, Array]:
  """Sequences (tokens_BxT, forced_mask_BxT, target_mask_BxT) with T = 2 * N + 3 (2 * N for
  'position').

  Positions >= the sequence's own length hold PAD; target positions are the generated ones
  (y and the final EOS), forced positions are everything the decoder is fed as given.
  """
  n = x_BxN.shape[1]
  if layout == "position":
    in_len_BxN = jnp.arange(n)[None, :] < len_B[:, None]
    tokens = jnp.concatenate([jnp.where(in_len_BxN, x_BxN, PAD),
                              jnp.where(in_len_BxN, y_BxN, PAD)], axis=1)
    no_BxN = jnp.zeros_like(in_len_BxN)
    return (tokens.astype(jnp.int32), jnp.concatenate([in_len_BxN, no_BxN], axis=1),
            jnp.concatenate([no_BxN, in_len_BxN], axis=1))
  p_T = jnp.arange(2 * n + 3)
  pos, ln = p_T[None, :], len_B[:, None]
  take = lambda a, i: jnp.take_along_axis(a, jnp.clip(i, 0, n - 1), axis=1)
  if layout == "aligned":
    is_x, is_y = (pos % 2 == 1) & (pos < 2 * ln), (pos % 2 == 0) & (pos >= 2) & (pos <= 2 * ln)
    x_part, y_part = take(x_BxN, (pos - 1) // 2), take(y_BxN, (pos - 2) // 2)
  elif layout == "concat":
    is_x, is_y = (pos >= 1) & (pos <= ln), (pos >= ln + 2) & (pos <= 2 * ln + 1)
    x_part, y_part = take(x_BxN, pos - 1), take(y_BxN, pos - ln - 2)
  else:
    raise ValueError(f"layout {layout!r} not in {LAYOUTS}")
  sep_pos = 2 * ln + 1 if layout == "aligned" else ln + 1
  is_sep, is_eos, is_bos = pos == sep_pos, pos == 2 * ln + 2, pos == 0
  tokens = jnp.where(is_x, x_part, jnp.where(is_y, y_part, PAD))
  tokens = jnp.where(is_bos, BOS, jnp.where(is_sep, SEP, jnp.where(is_eos, EOS, tokens)))
  forced = is_bos | is_x | is_sep
  if layout == "concat":  # the whole prompt BOS x SEP is forced
    forced = pos <= sep_pos
  target = is_y | is_eos
  return tokens.astype(jnp.int32), forced, target


def position_io(tokens_BxT: Array) -> tuple[Array, Array, Array]:
  """A 'position' sequence as (model input x_BxN, labels y_BxN, valid_BxN). Padding is fed as
  letter 0: a causal model's outputs before it do not depend on it, and PAD is not a symbol."""
  n = tokens_BxT.shape[-1] // 2
  x_BxN, y_BxN = tokens_BxT[..., :n], tokens_BxT[..., n:]
  valid_BxN = x_BxN != PAD
  return jnp.where(valid_BxN, x_BxN, 0), y_BxN, valid_BxN


def read_outputs(tokens_BxT: np.ndarray, len_B: np.ndarray, layout: str) -> np.ndarray:
  """The output letters y [B, N] read back from (decoded) sequences of a layout."""
  if layout == "position":
    return tokens_BxT[:, tokens_BxT.shape[-1] // 2:]
  n = (tokens_BxT.shape[-1] - 3) // 2
  i_N = np.arange(n)
  pos_BxN = (2 * i_N + 2)[None] if layout == "aligned" else len_B[:, None] + 2 + i_N[None]
  return np.take_along_axis(tokens_BxT, np.broadcast_to(pos_BxN, (len(len_B), n)), axis=-1)


def to_text(tokens: np.ndarray) -> str:
  """Readable form of one token row (specials as <s> | </s>, pad dropped)."""
  names = {BOS: "<s>", SEP: "|", EOS: "</s>", PAD: ""}
  return "".join(names.get(int(t), SYMBOLS[int(t)] if int(t) < len(SYMBOLS) else "?")
                 for t in tokens)
