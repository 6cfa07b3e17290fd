"""Named key derivation: every random stream is a fold-in of a run key by a constant derived from
its name (stream_id), so train, test, ood and probe, being distinct names, never share a stream."""

import zlib

import jax

# Every stream name (or, for "name/<suffix>", its part before the slash: one stream per letters
# task or experiment). stream() rejects any other, so a typo cannot silently open a new stream.
STREAMS = (
    "teacher", "teacher_weights", "teacher_biases", "split", "encoding", "encoding_order",
    "student", "train", "test", "ood", "ood_hotness", "probe", "fewshot", "data", "decode",
    "init", "task", "finetune", "replay", "lora", "theorem_error", "theorem_count", "tiny_models",
)


def stream_id(name: str) -> int:
  """A stable 31-bit constant for a stream name (crc32, not Python's salted hash)."""
  return zlib.crc32(name.encode()) & 0x7FFFFFFF


def stream(key: jax.Array, name: str) -> jax.Array:
  """The key of the named stream derived from `key`; ValueError for a name not in STREAMS."""
  if name.split("/", 1)[0] not in STREAMS:
    raise ValueError(f"unknown random stream {name!r}; allowed: {', '.join(STREAMS)} "
                     f"(or <name>/<suffix>)")
  return jax.random.fold_in(key, stream_id(name))


def step_key(key: jax.Array, step) -> jax.Array:
  """Per-step key: a resumed run draws exactly what an uninterrupted one drew."""
  return jax.random.fold_in(key, step)


def run_key(base_seed: int, seed_index) -> jax.Array:
  """The key of seed `seed_index`; solo run i uses run_key(base, i) too."""
  return jax.random.fold_in(jax.random.key(base_seed), seed_index)
