"""Training data as token arrays on the host: documents (lists of token ids) packed into
fixed-length rows, an optional loss mask per token, batches drawn on the device from a key.

Packing: each document becomes [BOS] + ids + [EOS] (BOS as the llm_eval prompts start, EOS so
the model learns to stop), the documents are concatenated into one stream, and the stream is cut
into rows of `seq_len` tokens that overlap by one token, so every token of the stream (except
the first) is a prediction target exactly once. Attention runs across document boundaries
inside a row (plain packing, as GPT-2; the EOS/BOS pair marks the boundary). The last row is
padded with PAD at weight 0.

A token's weight says whether predicting it counts in the loss: BOS 0 (it only follows an EOS),
EOS 1, a document's tokens 1, or its own loss mask (0 on a prompt, 1 on the answer: expert
fine-tuning on answers only).
"""

import json
import os
from typing import NamedTuple

import jax
import numpy as np

from compgen_jax.lm_train.model import BOS_ID, EOS_ID, NUM_SPECIAL, PAD_ID
from compgen_jax.types import Array, DataError


class Packed(NamedTuple):
  tokens_NxL: np.ndarray  # int32 rows
  weight_NxL: np.ndarray  # float32: 1 where predicting that token counts (position 0 never)


def pack(documents: list, seq_len: int, loss_masks: list | None = None,
         add_bos: bool = True) -> Packed:
  """Rows of `seq_len` tokens of the packed `documents` (module docstring)."""
  if loss_masks is not None and len(loss_masks) != len(documents):
    raise DataError(f"{len(loss_masks)} loss masks for {len(documents)} documents")
  if not documents:
    raise DataError("no documents to pack")
  tokens, weights = [], []
  for d, doc in enumerate(documents):
    mask = np.ones(len(doc)) if loss_masks is None else np.asarray(loss_masks[d], np.float32)
    if mask.shape != (len(doc),):
      raise DataError(f"document {d}: {len(doc)} tokens but a loss mask of shape {mask.shape}")
    head = [BOS_ID] if add_bos else []
    tokens += [np.asarray(head, np.int32), np.asarray(doc, np.int32), np.int32([EOS_ID])]
    weights += [np.zeros(len(head), np.float32), mask.astype(np.float32), np.ones(1, np.float32)]
  stream, weight = np.concatenate(tokens), np.concatenate(weights)
  stride = seq_len - 1
  num_rows = max(1, -(-(len(stream) - 1) // stride))
  total = num_rows * stride + 1
  stream = np.concatenate([stream, np.full(total - len(stream), PAD_ID, np.int32)])
  weight = np.concatenate([weight, np.zeros(total - len(weight), np.float32)])
  idx_NxL = np.arange(num_rows)[:, None] * stride + np.arange(seq_len)[None, :]
  weight_NxL = weight[idx_NxL]
  weight_NxL[:, 0] = 0.0  # a row's first token is context only (the previous row's target)
  return Packed(stream[idx_NxL], weight_NxL)


def draw_batch(key: Array, tokens_NxL: Array, weight_NxL: Array, batch_size: int):
  """`batch_size` rows drawn uniformly with replacement (on the device, from `key`)."""
  idx_B = jax.random.randint(key, (batch_size,), 0, tokens_NxL.shape[0])
  return tokens_NxL[idx_B], weight_NxL[idx_B]


def synthetic_documents(seed: int, num_documents: int, vocab_size: int, min_len: int,
                        max_len: int) -> list[list[int]]:
  """Arithmetic progressions over the non-special ids: a random start and stride (1-3) per
  document, so after two tokens the rest is determined (a stream a model learns quickly)."""
  rng = np.random.default_rng(seed)
  span = vocab_size - NUM_SPECIAL
  out = []
  for _ in range(num_documents):
    start, stride = rng.integers(span), rng.integers(1, 4)
    length = rng.integers(min_len, max_len + 1)
    out.append([int(NUM_SPECIAL + (start + stride * i) % span) for i in range(length)])
  return out


def read_jsonl(path: str, vocab_size: int) -> tuple[list, list | None]:
  """(documents, loss masks or None) of a jsonl file, a document a line: {"tokens": [ids]}
  and optionally "loss_mask": [0/1 per token] (every line or none). DataError naming the line."""
  if not os.path.isfile(path):
    raise DataError(f"{path!r} not found")
  docs, masks = [], []
  with open(path) as f:
    for n, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        row = json.loads(line)
        ids = np.asarray(row["tokens"], np.int64)
      except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise DataError(f"{path!r} line {n}: not a {{\"tokens\": [ids]}} object ({e})") from e
      if ids.ndim != 1 or (ids.size and not (0 <= ids.min() and ids.max() < vocab_size)):
        raise DataError(f"{path!r} line {n}: token ids must be a list in [0, {vocab_size})")
      docs.append(ids.tolist())
      masks.append(row.get("loss_mask"))
  if not docs:
    raise DataError(f"{path!r} holds no documents")
  given = [m is not None for m in masks]
  if any(given) and not all(given):
    raise DataError(f"{path!r}: 'loss_mask' on some lines only (line {given.index(False) + 1} "
                    f"has none)")
  return docs, (masks if all(given) else None)
