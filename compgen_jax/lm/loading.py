"""Reading a local Hugging Face checkpoint directory: config.json, safetensors shards and the
SentencePiece tokenizer.model.

Nothing is downloaded. A missing, unreadable or mis-shaped file is a CheckpointError naming it.
"""

import glob
import json
import os

import numpy as np
import sentencepiece as spm
from safetensors import safe_open

from compgen_jax.types import CheckpointError


def read_config(directory: str) -> tuple[dict, str]:
  """The parsed config.json of `directory` and its path."""
  path = os.path.join(directory, "config.json")
  if not os.path.isfile(path):
    raise CheckpointError(f"{path!r} not found: a Hugging Face checkpoint directory holds "
                          "config.json and *.safetensors (nothing is downloaded)")
  try:
    with open(path) as f:
      return json.load(f), path
  except (OSError, json.JSONDecodeError) as e:
    raise CheckpointError(f"{path!r} could not be read as JSON: {e}") from e


def shard_of_tensor(directory: str) -> dict[str, str]:
  """Tensor name -> the safetensors file holding it (from the shard index when there is one)."""
  index = os.path.join(directory, "model.safetensors.index.json")
  if os.path.isfile(index):
    with open(index) as f:
      weight_map = json.load(f)["weight_map"]
    return {name: os.path.join(directory, shard) for name, shard in weight_map.items()}
  shards = sorted(glob.glob(os.path.join(directory, "*.safetensors")))
  if not shards:
    raise CheckpointError(f"no *.safetensors file in {directory!r}")
  where = {}
  for path in shards:
    with _open(path) as f:
      where.update(dict.fromkeys(f.keys(), path))
  return where


def read_tensors(directory: str, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
  """The tensors named in `shapes` from the shards of `directory`, each checked against its
  shape before it is read (a wrong vocabulary or width fails here, naming the file)."""
  where = shard_of_tensor(directory)
  missing = sorted(set(shapes) - set(where))
  if missing:
    files = sorted(set(where.values()))
    raise CheckpointError(f"{len(missing)} tensors missing from {files}, e.g. {missing[:3]}")
  out = {}
  for path in sorted(set(where[name] for name in shapes)):
    if not os.path.isfile(path):
      raise CheckpointError(f"safetensors shard {path!r} not found")
    with _open(path) as f:
      for name in (n for n in shapes if where[n] == path):
        got = tuple(f.get_slice(name).get_shape())
        if got != tuple(shapes[name]):
          raise CheckpointError(f"{path!r}: tensor {name!r} has shape {got}, the config "
                                f"says {tuple(shapes[name])}")
        out[name] = np.asarray(f.get_tensor(name))
  return out


def _open(path: str):
  try:  # the flax framework reads bfloat16, which safetensors.numpy cannot
    return safe_open(path, framework="flax")
  except Exception as e:  # safetensors raises several types for a bad header
    raise CheckpointError(f"{path!r} is not a readable safetensors file: {e}") from e


def read_tokenizer(directory: str, vocab_size: int) -> spm.SentencePieceProcessor:
  """The SentencePiece model in directory/tokenizer.model, which must have `vocab_size` pieces."""
  path = os.path.join(directory, "tokenizer.model")
  if not os.path.isfile(path):
    raise CheckpointError(f"{path!r} not found")
  try:
    sp = spm.SentencePieceProcessor(model_file=path)
  except Exception as e:  # sentencepiece raises RuntimeError or OSError for a bad proto
    raise CheckpointError(f"{path!r} is not a readable SentencePiece model: {e}") from e
  if sp.get_piece_size() != vocab_size:
    raise CheckpointError(f"{path!r} has {sp.get_piece_size()} pieces, the model's vocabulary "
                          f"has {vocab_size}")
  return sp
