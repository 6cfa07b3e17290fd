"""Tokens per second of plain vs composed (background + 2 experts) generation, Gemma-2-shaped
random models (`composition/generate.py`: prefill, then lockstep decoding in one while_loop).

  python benchmarks/compose_llm_speed.py                      # tiny, seconds on a CPU
  python benchmarks/compose_llm_speed.py --size=2b --dtype=bfloat16 --batch=8   # accelerator
  python benchmarks/compose_llm_speed.py --draft_len=4 --agreement=1,0.99,0.9,0
  python benchmarks/compose_llm_speed.py --stack_models=2,3,5 --repeats=5   # vmapped models

With --draft_len, composed greedy decoding is also timed speculatively (background as the draft,
`composition/speculative.py`) with experts interpolated between the background (agreement 1:
the experts equal it, every draft accepted) and independent random models (agreement 0).

With --stack_models, composed greedy decoding of k models (one architecture) is timed per
model (one forward each) and stacked (one vmapped forward over stacked params,
`composition/stacked.py`), the two ways alternating call by call, so a machine shared with
other jobs slows both alike; the ratio of each adjacent pair is reported (median, range) and
the tokens are checked equal.

`--size=2b` has gemma-2-2b's dimensions (2.6B parameters per model, three models): for an
accelerator, far too slow and large for a CPU. Prints a table; never asserts on time.
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from compgen_jax.composition import generate, speculative
from compgen_jax.lm import gemma2

SIZES = {
    "tiny": dict(vocab_size=256, width=64, num_layers=2, num_heads=2, num_kv_heads=1,
                 head_dim=32, mlp_dim=256, sliding_window=16),
    "small": dict(vocab_size=4096, width=512, num_layers=6, num_heads=8, num_kv_heads=4,
                  head_dim=64, mlp_dim=2048, sliding_window=256),
    "2b": dict(vocab_size=256_000, width=2304, num_layers=26, num_heads=8, num_kv_heads=4,
               head_dim=256, mlp_dim=9216, sliding_window=4096),
}
_SIZE = flags.DEFINE_enum("size", "tiny", list(SIZES), "model dimensions")
_DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "params and KV cache")
_BATCH = flags.DEFINE_integer("batch", 4, "prompts generated at once")
_PROMPT = flags.DEFINE_integer("prompt_len", 64, "prompt tokens (no padding)")
_NEW = flags.DEFINE_integer("new_tokens", 64, "tokens generated per prompt (EOS ignored)")
_CHUNK = flags.DEFINE_integer("prefill_chunk", 512, "prefill chunk")
_REPEATS = flags.DEFINE_integer("repeats", 3, "timed calls after one compile")
_DRAFT = flags.DEFINE_integer("draft_len", 0, "speculative rounds draft this many tokens "
                              "(0: not timed)")
_AGREEMENT = flags.DEFINE_list("agreement", ["1", "0.9", "0"], "experts = a * background + "
                               "(1 - a) * an independent init, for each a (with --draft_len)")
_STACK = flags.DEFINE_list("stack_models", [], "numbers of models k (background + k - 1 "
                           "experts) to time per-model vs stacked, e.g. 2,3,5 (empty: not timed)")
_LAYERS = flags.DEFINE_integer("num_layers", 0, "override the size's layer count (0: keep): "
                               "2b dimensions at 2 and 4 layers fit a 24 GB CPU machine, and "
                               "the time per layer extrapolates to 26")


def _config(size: str, num_layers: int = 0) -> gemma2.Gemma2Config:
  dims = dict(SIZES[size], **({"num_layers": num_layers} if num_layers else {}))
  return gemma2.Gemma2Config(
      **dims, rms_eps=1e-6, rope_base=10_000.0, query_pre_attn_scalar=float(dims["head_dim"]),
      attn_softcap=50.0, final_softcap=30.0,
      sliding_layers=tuple(i % 2 == 0 for i in range(dims["num_layers"])),
      bos_id=2, eos_id=1, pad_id=0)


def _time(fn) -> float:
  jax.block_until_ready(fn())
  start = time.perf_counter()
  for _ in range(_REPEATS.value):
    jax.block_until_ready(fn())
  return (time.perf_counter() - start) / _REPEATS.value


def main(argv):
  del argv
  c = _config(_SIZE.value, _LAYERS.value)
  dtype = jnp.dtype(_DTYPE.value)
  model = gemma2.make_model(c, dtype)
  init = jax.jit(gemma2.init_params, static_argnums=(0, 2))  # fused: no float32 temporaries
  params = tuple(init(c, k, dtype) for k in jax.random.split(jax.random.key(0), 3))
  batch, new = _BATCH.value, _NEW.value
  prompts = jax.random.randint(jax.random.key(1), (batch, _PROMPT.value), 3, c.vocab_size)
  prompts = prompts.at[:, 0].set(c.bos_id)
  valid = jnp.ones(prompts.shape, bool)
  rows = []
  for name, k in (("plain", 1), ("composed", 3)):
    run = lambda k=k: generate.generate((model,) * k, params[:k], prompts, valid,
                                        np.full(batch, new), stop_at_eos=False,
                                        prefill_chunk=_CHUNK.value).tokens_BxN
    rows.append((name, k, _time(run)))
  print(f"size={_SIZE.value} layers={c.num_layers} dtype={_DTYPE.value} batch={batch} "
        f"prompt={_PROMPT.value} "
        f"new={new} device={jax.devices()[0].platform}")
  print("decoding | models | seconds per call (prefill + decode) | new tokens per second")
  for name, k, sec in rows:
    print(f"{name} | {k} | {sec:.3f} | {batch * new / sec:.3g}")
  print(f"composed / plain time: {rows[1][2] / rows[0][2]:.2f}x (3 models: ideal 3x or less)")
  if _DRAFT.value:
    _speculative(model, params, prompts, valid, batch, new)
  if _STACK.value:
    _stacking(model, c, dtype, prompts, valid, batch, new)


def _stacking(model, c, dtype, prompts, valid, batch, new):
  """Per-model vs stacked (vmapped) composed greedy decoding of k models, alternating; the
  tokens are checked equal, the time only printed."""
  init = jax.jit(gemma2.init_params, static_argnums=(0, 2))
  print("models k | per-model s | stacked s | per-model / stacked: median [min, max] of "
        f"{_REPEATS.value} alternating pairs | tokens")
  for k in map(int, _STACK.value):
    params = tuple(init(c, key, dtype) for key in jax.random.split(jax.random.key(2), k))
    run = lambda flag, params=params, k=k: generate.generate(
        (model,) * k, params, prompts, valid, np.full(batch, new), stop_at_eos=False,
        prefill_chunk=_CHUNK.value, stack_models=flag).tokens_BxN
    same = np.array_equal(run(False), run(True))  # compiles both
    times = {False: [], True: []}
    for r in range(_REPEATS.value):
      for flag in ((False, True) if r % 2 == 0 else (True, False)):
        start = time.perf_counter()
        jax.block_until_ready(run(flag))
        times[flag].append(time.perf_counter() - start)
    ratios = np.asarray(times[False]) / np.asarray(times[True])
    print(f"{k} | {np.median(times[False]):.3f} | {np.median(times[True]):.3f} | "
          f"{np.median(ratios):.2f}x [{ratios.min():.2f}, {ratios.max():.2f}] | "
          f"{'equal' if same else 'DIFFER'}")


def _speculative(model, params, prompts, valid, batch, new):
  """Plain vs speculative composed greedy decoding as the experts move away from the
  background; the tokens are checked equal, the time only printed."""
  print(f"agreement | plain s | speculative s (n={_DRAFT.value}) | speedup | drafts accepted "
        "| rounds / tokens")
  for a in map(float, _AGREEMENT.value):
    mix = lambda e, a=a: jax.tree.map(lambda x, y: (a * x + (1 - a) * y).astype(x.dtype),
                                      params[0], e)
    ps = (params[0], mix(params[1]), mix(params[2]))
    kw = dict(stop_at_eos=False, prefill_chunk=_CHUNK.value)
    plain = lambda ps=ps, kw=kw: generate.generate((model,) * 3, ps, prompts, valid,
                                                   np.full(batch, new), **kw)
    fast = lambda ps=ps, kw=kw: speculative.generate_speculative(
        (model,) * 3, ps, prompts, valid, np.full(batch, new), draft_len=_DRAFT.value, **kw)
    p, f = plain(), fast()
    same = np.array_equal(p.tokens_BxN, f.gen.tokens_BxN)
    t_plain = _time(lambda plain=plain: plain().tokens_BxN)
    t_fast = _time(lambda fast=fast: fast().gen.tokens_BxN)
    print(f"{a:g} | {t_plain:.3f} | {t_fast:.3f} | {t_plain / t_fast:.2f}x | "
          f"{int(f.accepted_B.sum()) / max(int(f.drafted_B.sum()), 1):.2f} | "
          f"{int(f.num_rounds)} / {new}{'' if same else ' (TOKENS DIFFER)'}")


if __name__ == "__main__":
  app.run(main)
