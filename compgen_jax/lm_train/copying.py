"""In-context copying of a Gemma-2 export (results/cpu/llm_cpu_pilot/NOTES.md, "Measured:
in-context copying").

Greedy next-token accuracy on held-out repeat documents, [BOS] + encode(line + "\\n" + line) as
llm_data's repeat source trains them (lines from build.repeated_passages at a seed training does
not read), scored on the second copy's tokens against the first copy's: nothing predicts a
line's first copy, only copying it predicts the second, so second >> first means the model
copies in context (benchmarks/copying.py prints the two numbers).
"""

import filecmp
import os
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from compgen_jax import checks
from compgen_jax.llm_data import build
from compgen_jax.lm import gemma2
from compgen_jax.lm import model as model_lib
from compgen_jax.types import Array, CheckpointError, DataError, PyTree

# the held-out lines of results/cpu/llm_cpu_pilot/NOTES.md (the repeat source reads seed 0)
COUNT, SEED = 64, 99
BATCH = 16  # documents per forward

LogitsFn = Callable[[Array, Array], Array]  # (tokens_BxL, valid_BxL) -> logits_BxLxV


class Copying(NamedTuple):
  """Greedy accuracy, a mean over documents of each document's mean over its positions."""
  first: float  # on tokens 1..n-1 of the first copy (n = len(encode(line)))
  second: float  # on the document's last n-1 tokens (the second copy's)


class Document(NamedTuple):
  tokens: list[int]  # [BOS] + encode(line + "\n" + line)
  copy_len: int  # n = len(encode(line))


def documents(sp, bos_id: int, lines: Sequence[str]) -> list[Document]:
  """Each line as the repeat source's training document; DataError for a line of < 2 tokens
  (nothing in it to score)."""
  docs = []
  for line in lines:
    n = len(sp.encode(line))
    if n < 2:
      raise DataError(f"repeat line {line!r} is {n} token(s): a copy needs 2 to be scored")
    docs.append(Document([bos_id, *sp.encode(line + "\n" + line)], n))
  return docs


def correct_per_position(doc: Document, predicted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(first copy, second copy) booleans: predicted[i] (the greedy token after tokens[:i+1])
  against tokens[i+1], on positions 1..n-1 of the first copy and the last n-1 tokens."""
  ok = predicted[:len(doc.tokens) - 1] == np.asarray(doc.tokens[1:])
  n = doc.copy_len
  return ok[1:n], ok[len(ok) - n + 1:]


def accuracy(logits_fn: LogitsFn, docs: Sequence[Document], pad_id: int,
             batch: int = BATCH) -> Copying:
  """Copying accuracy of `logits_fn` over `docs`: batches of `batch` documents right-padded
  with pad_id to the longest (one shape for every batch: one compile; a short last batch is
  filled with its last document, whose repeats are not scored)."""
  width = max(len(d.tokens) for d in docs)
  firsts, seconds = [], []
  for start in range(0, len(docs), batch):
    part = list(docs[start:start + batch])
    rows = part + [part[-1]] * (batch - len(part))
    tokens_BxL = np.full((batch, width), pad_id, np.int32)
    valid_BxL = np.zeros((batch, width), bool)
    for i, d in enumerate(rows):
      tokens_BxL[i, :len(d.tokens)] = d.tokens
      valid_BxL[i, :len(d.tokens)] = True
    predicted_BxL = np.asarray(jnp.argmax(logits_fn(tokens_BxL, valid_BxL), -1))
    for d, predicted in zip(part, predicted_BxL[:len(part)], strict=True):
      first, second = correct_per_position(d, predicted)
      firsts.append(first.mean())
      seconds.append(second.mean())
  return Copying(first=float(np.mean(firsts)), second=float(np.mean(seconds)))


def score_masks(docs: Sequence[Document], pad_id: int) -> tuple[np.ndarray, ...]:
  """`docs` as one batch for a model evaluated inside training (lm_train/family.py): tokens_DxL
  right-padded with pad_id, valid_DxL, and the first and second copy's positions as float
  masks over the predictions (index i: the token after tokens[:i+1]), as correct_per_position
  scores them."""
  width = max(len(d.tokens) for d in docs)
  tokens_DxL = np.full((len(docs), width), pad_id, np.int32)
  valid_DxL = np.zeros((len(docs), width), bool)
  first_DxL, second_DxL = (np.zeros((len(docs), width), np.float32) for _ in range(2))
  for i, d in enumerate(docs):
    size, n = len(d.tokens), d.copy_len
    tokens_DxL[i, :size] = d.tokens
    valid_DxL[i, :size] = True
    first_DxL[i, 1:n] = 1.0
    second_DxL[i, size - n:size - 1] = 1.0
  return tokens_DxL, valid_DxL, first_DxL, second_DxL


def held_out_documents(data_dir: str, sp, bos_id: int, count: int = COUNT,
                        seed: int = SEED) -> list[Document]:
  """The `count` held-out repeat documents of llm_data's `data_dir` (lines drawn with `seed`)."""
  return documents(sp, bos_id, build.repeated_passages(data_dir, count=count, seed=seed))


def model_logits(model: model_lib.Model, params: PyTree) -> LogitsFn:
  """`model`'s teacher-forced logits at `params`, jitted (params an argument, not a constant)."""
  forward = jax.jit(lambda p, t, v: model_lib.forward(model, p, t, v))
  return lambda tokens_BxL, valid_BxL: forward(params, tokens_BxL, valid_BxL)


def _same_tokenizer(export: str, data_dir: str) -> None:
  """An export that carries a tokenizer.model (lm_train's do) must carry the data's: the lines
  are encoded with the data's, and another of the same size would score nonsense silently."""
  ours, theirs = (os.path.join(d, build.TOKENIZER) for d in (export, data_dir))
  if os.path.isfile(ours) and not filecmp.cmp(ours, theirs, shallow=False):
    raise CheckpointError(f"{ours!r} differs from {theirs!r}: the export was not trained on "
                          "this data directory's tokenizer")


def measure(export: str, data_dir: str, count: int = COUNT, seed: int = SEED,
            batch: int = BATCH) -> Copying:
  """Copying of the Gemma-2 export at `export` on `count` repeat lines drawn with `seed` from
  llm_data's `data_dir` (its tokenizer.model, checked against the export's vocabulary and
  special ids, and equal to the export's own when it has one). A missing export, tokenizer or
  corpus fails before any forward pass."""
  checks.integer("count", count, low=1)
  checks.integer("seed", seed, low=0)
  checks.integer("batch", batch, low=1)
  model, params = gemma2.load(export)
  sp = gemma2.load_tokenizer(data_dir, model)
  _same_tokenizer(export, data_dir)
  return accuracy(model_logits(model, params),
                  held_out_documents(data_dir, sp, model.bos_id, count, seed), model.pad_id, batch)
