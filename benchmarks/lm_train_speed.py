"""Training throughput of the lm_train family (configs/lm_train.py) per model size: the engine's
jitted chunk of one run (packed synthetic rows), timed after one compile.

  python benchmarks/lm_train_speed.py                         # the three pilot sizes below
  python benchmarks/lm_train_speed.py --sizes=quick,cpu --vocab_size=8192 --seq_len=256

Prints parameters, tokens/s (batch x seq_len tokens a step) and seconds per 1000 steps, one row
per size; never asserts on time.
"""

import math
import time

import jax
from absl import app, flags

from compgen_jax import cli
from compgen_jax.lm import gemma2
from compgen_jax.lm_train import experiment, family
from compgen_jax.lm_train import model as model_lib
from compgen_jax.training import chunk as chunk_lib

# model-section overrides of the quick preset; quick and cpu are the presets' own sizes
SIZES = {
    "quick": {},
    "small": dict(width=128, num_layers=4, num_heads=4, num_kv_heads=2, head_dim=32,
                  mlp_dim=512),
    "cpu": dict(width=192, num_layers=6, num_heads=4, num_kv_heads=2, head_dim=48,
                mlp_dim=768),
    "large": dict(width=256, num_layers=8, num_heads=4, num_kv_heads=2, head_dim=64,
                  mlp_dim=1024),
}
_SIZES = flags.DEFINE_list("sizes", ["quick", "cpu", "large"], f"which of {', '.join(SIZES)}")
_VOCAB = flags.DEFINE_integer("vocab_size", 4096, "vocabulary (a prose + code tokenizer's)")
_SEQ = flags.DEFINE_integer("seq_len", 256, "tokens per packed row")
_BATCH = flags.DEFINE_integer("batch", 16, "rows per step")
_STEPS = flags.DEFINE_integer("steps", 20, "steps per timed chunk")
_REPEATS = flags.DEFINE_integer("repeats", 3, "timed chunks after the compile")


def measure(size: str) -> dict:
  cfg = cli.load_config_file("configs/lm_train.py:quick")
  with cfg.unlocked():
    cfg.model.update(vocab_size=_VOCAB.value, **SIZES[size])
    cfg.corpus.update(seq_len=_SEQ.value, num_documents=4000, min_len=32, max_len=512)
    cfg.train.batch_size = _BATCH.value
  fam = family.family(cfg, *experiment.packed(cfg))
  chunk = chunk_lib.make_chunk(fam.step, _STEPS.value, fam.strategy)
  consts = fam.consts()
  state = jax.jit(jax.vmap(fam.init_one))(*fam.inputs)
  start = time.perf_counter()
  state = jax.block_until_ready(chunk(state, *consts)[0])
  compile_s = time.perf_counter() - start
  start = time.perf_counter()
  for _ in range(_REPEATS.value):
    state = chunk(state, *consts)[0]
  jax.block_until_ready(state)
  seconds = (time.perf_counter() - start) / (_REPEATS.value * _STEPS.value)
  shapes = gemma2.param_shapes(model_lib.gemma_config(cfg.model))
  params = sum(math.prod(s.shape) for s in jax.tree.leaves(shapes))
  return {"size": size, "params": params, "tokens_s": _BATCH.value * _SEQ.value / seconds,
          "s_per_1000": 1000 * seconds, "compile_s": compile_s}


def main(argv):
  del argv
  print(f"vocab {_VOCAB.value}, seq_len {_SEQ.value}, batch {_BATCH.value}, "
        f"{jax.device_count()} {jax.default_backend()} device(s)")
  print(f"{'size':>6} {'params':>10} {'tokens/s':>9} {'s/1000 steps':>13} {'compile s':>10}")
  for size in _SIZES.value:
    r = measure(size)
    print(f"{r['size']:>6} {r['params']:>10,} {r['tokens_s']:>9.0f} {r['s_per_1000']:>13.1f} "
          f"{r['compile_s']:>10.1f}", flush=True)


if __name__ == "__main__":
  app.run(main)
