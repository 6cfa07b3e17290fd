"""KV-cache vs full-forward greedy decoding of a 3-model composition (time per sequence batch).

  python benchmarks/decode_speed.py --batch=256 --length=32

Prints a table; never asserts on time (timings on a shared CPU are inflated).
"""

import time

import jax
import jax.numpy as jnp
import ml_collections
from absl import app, flags

from compgen_jax.composition import decode
from compgen_jax.letters import data
from compgen_jax.letters.zoo import letter_lm
from compgen_jax.lm.model import full_forward_model

_BATCH = flags.DEFINE_integer("batch", 256, "strings decoded at once")
_LENGTH = flags.DEFINE_integer("length", 32, "letters per string (sequence: 2 * length + 3)")
_WIDTH = flags.DEFINE_integer("width", 64, "model width (2 layers, 2 heads)")
_REPEATS = flags.DEFINE_integer("repeats", 3, "timed calls after one compile")


def _time(fn, *args) -> float:
  jax.block_until_ready(fn(*args))
  start = time.perf_counter()
  for _ in range(_REPEATS.value):
    jax.block_until_ready(fn(*args))
  return (time.perf_counter() - start) / _REPEATS.value


def main(argv):
  del argv
  cfg = ml_collections.ConfigDict(dict(width=_WIDTH.value, num_layers=2, num_heads=2,
                                       mlp_ratio=4, positions="rotary", max_len=256,
                                       tie_head=False))
  model = letter_lm(cfg)
  params = tuple(model.init(k) for k in jax.random.split(jax.random.key(0), 3))
  n = _LENGTH.value
  x = data.sample_inputs(jax.random.key(1), _BATCH.value, n)
  tokens, forced, _ = data.build(x, jnp.full((_BATCH.value,), n), x, "concat")
  rows = []
  for name, m in (("kv_cache", model), ("full_forward", full_forward_model(model))):
    fn = jax.jit(lambda p, m=m: decode.decode((m,) * 3, p, tokens, forced).tokens_BxT)
    rows.append((name, _time(fn, params)))
  print(f"batch={_BATCH.value} tokens={tokens.shape[1]} width={_WIDTH.value} models=3")
  print("decoder | seconds per batch | tokens per second")
  for name, sec in rows:
    print(f"{name} | {sec:.3f} | {_BATCH.value * tokens.shape[1] / sec:.0f}")
  print(f"speedup of the KV cache: {rows[1][1] / rows[0][1]:.1f}x")


if __name__ == "__main__":
  app.run(main)
