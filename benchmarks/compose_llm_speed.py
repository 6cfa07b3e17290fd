"""Tokens per second of plain vs composed (background + 2 experts) generation, Gemma-2-shaped
random models (`composition/generate.py`: prefill, then lockstep decoding in one while_loop),
against the physical limit and the authors' Hugging Face loop.

  python benchmarks/compose_llm_speed.py                      # tiny, seconds on a CPU
  python benchmarks/compose_llm_speed.py --hf --min_prompt_len=32   # + HF loop (make venv-hf)
  python benchmarks/compose_llm_speed.py --size=2b --dtype=bfloat16 --batch=8   # accelerator
  python benchmarks/compose_llm_speed.py --draft_len=4 --agreement=1,0.99,0.9,0
  python benchmarks/compose_llm_speed.py --draft_len=4 --checkpoints=B,E1,E2 \
      --prompts=P.jsonl --out=speculative.jsonl   # trained experts on their prompts
  python benchmarks/compose_llm_speed.py --stack_models=2,3,5 --repeats=5   # vmapped models

Composition is the authors' operator (sum_i log p_i - clamp(log p_b)) throughout. Each of the
3 models is also timed alone through the same jitted `generate` (the same prompts and token
count): the sum of the 3 single-model times is the physical limit of composed decoding on one
device (no more work than the 3 decodes), and composed / limit is printed (the ratio of the
times in each round: median [min, max]). All timed calls of a table alternate round by round,
so a machine shared with other jobs slows them alike.

With --hf (float32 only; torch and transformers are not project dependencies: `make venv-hf`)
the 3 models are exported with `lm/hf_export.py` to a temp dir, loaded with transformers'
Gemma2ForCausalLM and decoded by the authors' loop (`hf_compose_loop.py`: per-model
past_key_values, greedy), at batch 1 (the prompts one at a time, as the authors run; ours runs
them one at a time too, each left-padded to --prompt_len) and batched (left padding and an
attention mask); its tokens are checked equal to ours.

With --draft_len, composed greedy decoding is also timed speculatively (background as the draft,
`composition/speculative.py`) with experts interpolated between the background (agreement 1:
the experts equal it, every draft accepted) and independent random models (agreement 0), or
(--checkpoints, --prompts) with local Gemma-2 checkpoints (trained experts) on the first
--batch prompts of a jsonl file of {"prompt": text} records; --temperature > 0 times
speculative sampling against plain composed sampling instead (the draws differ). --out appends
a jsonl row per setting: every call's seconds, the drafts drafted and accepted per prompt and
the call's acceptance fraction.

With --stack_models, composed greedy decoding of k models (one architecture) is timed per
model (one forward each) and stacked (one vmapped forward over stacked params,
`composition/stacked.py`), alternating; the ratio of each round is reported (median, range) and
the tokens are checked equal.

`--size=2b` has gemma-2-2b's dimensions (2.6B parameters per model, three models): for an
accelerator, far too slow and large for a CPU. Prints a table; never asserts on time.
"""

import functools
import os
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from compgen_jax import metric_writer
from compgen_jax.composition import generate, speculative
from compgen_jax.composition.spec import PAPER
from compgen_jax.llm_eval import decoding
from compgen_jax.lm import gemma2, hf_export

AUTHORS = PAPER._replace(operator="authors")

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
_PROMPT = flags.DEFINE_integer("prompt_len", 64, "prompt tokens (the longest prompt)")
_MIN_PROMPT = flags.DEFINE_integer("min_prompt_len", 0, "row b's prompt length is drawn from "
                                   "[min_prompt_len, prompt_len], left-padded (0: no padding)")
_NEW = flags.DEFINE_integer("new_tokens", 64, "tokens generated per prompt (EOS ignored)")
_CHUNK = flags.DEFINE_integer("prefill_chunk", 512, "prefill chunk")
_REPEATS = flags.DEFINE_integer("repeats", 3, "timed calls after one compile")
_DRAFT = flags.DEFINE_integer("draft_len", 0, "speculative rounds draft this many tokens "
                              "(0: not timed)")
_AGREEMENT = flags.DEFINE_list("agreement", ["1", "0.9", "0"], "experts = a * background + "
                               "(1 - a) * an independent init, for each a (with --draft_len)")
_TEMPERATURE = flags.DEFINE_float("temperature", 0.0, "speculative rows: 0 greedy (the tokens "
                                  "checked equal), > 0 sampling at this temperature")
_CHECKPOINTS = flags.DEFINE_list("checkpoints", [], "local Gemma-2 directories, background "
                                 "first: the speculative rows on these (with --draft_len, "
                                 "--prompts) instead of random models; nothing else is timed")
_PROMPTS_FILE = flags.DEFINE_string("prompts", "", "with --checkpoints: a jsonl file of "
                                    "{\"prompt\": text}; the first --batch are decoded")
_OUT = flags.DEFINE_string("out", "", "appends a jsonl row per speculative setting (seconds "
                           "per call, drafts drafted and accepted per prompt, acceptance)")
_STACK = flags.DEFINE_list("stack_models", [], "numbers of models k (background + k - 1 "
                           "experts) to time per-model vs stacked, e.g. 2,3,5 (empty: not timed)")
_HF = flags.DEFINE_bool("hf", False, "also time the authors' Hugging Face PyTorch loop on the "
                       "same checkpoints, at batch 1 and batched (needs `make venv-hf`)")
_HF_THREADS = flags.DEFINE_list("hf_threads", ["0"], "torch threads of the HF loop, a row each "
                                "(0: torch's default, one per core)")
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


@functools.partial(jax.jit, static_argnums=(0, 2))  # fused: no float32 temporaries
def _init(c: gemma2.Gemma2Config, key, dtype):
  """Random params, the embedding at std 0.02 (HF's initializer_range): at init_params' 0.1 the
  tied head's logit of the input token leads by far, and every random model of the small size
  repeats its last token (the models then agree on every token, which would make the check of
  HF's tokens and the agreement sweep vacuous); at 0.02 (tiny and small) each repeats 40-65 % of
  its tokens and the models disagree."""
  params = gemma2.init_params(c, key, dtype)
  return dict(params, embed=(params["embed"] * 0.2).astype(dtype))


def _alternate(fns) -> tuple[list, np.ndarray]:
  """(each fn's output from an untimed first call, seconds [F, R]): R = --repeats rounds, each
  calling every fn once, in reversed order every other round."""
  outs = [jax.block_until_ready(fn()) for fn in fns]  # compiles
  sec_FxR = np.zeros((len(fns), _REPEATS.value))
  for r in range(_REPEATS.value):
    for i in (range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))):
      start = time.perf_counter()
      jax.block_until_ready(fns[i]())
      sec_FxR[i, r] = time.perf_counter() - start
  return outs, sec_FxR


def _spread(x_R: np.ndarray) -> str:
  return f"{np.median(x_R):.2f}x [{x_R.min():.2f}, {x_R.max():.2f}]"


def _prompts(c: gemma2.Gemma2Config, batch: int) -> tuple[jax.Array, jax.Array]:
  """Left-padded random prompts [B, P] starting with BOS, and their validity."""
  length = _PROMPT.value
  tokens = jax.random.randint(jax.random.key(1), (batch, length), 3, c.vocab_size)
  lengths_B = (jax.random.randint(jax.random.key(3), (batch,), _MIN_PROMPT.value, length + 1)
               if _MIN_PROMPT.value else jnp.full((batch,), length))
  start_B = length - lengths_B
  col = jnp.arange(length)[None]
  tokens = jnp.where(col == start_B[:, None], c.bos_id, tokens)
  return jnp.where(col >= start_B[:, None], tokens, c.pad_id), col >= start_B[:, None]


def main(argv):
  del argv
  if _HF.value and _DTYPE.value != "float32":
    raise app.UsageError("--hf compares float32 models (HF loads the export in float32)")
  if not 0 <= _MIN_PROMPT.value <= _PROMPT.value:
    raise app.UsageError(f"--min_prompt_len must be in [0, {_PROMPT.value}]")
  if not all(t.isdigit() for t in _HF_THREADS.value):
    raise app.UsageError(f"--hf_threads must be counts >= 0, got {_HF_THREADS.value}")
  if _CHECKPOINTS.value:
    _on_checkpoints()
    return
  hf_loop = _hf_loop() if _HF.value else None
  c = _config(_SIZE.value, _LAYERS.value)
  dtype = jnp.dtype(_DTYPE.value)
  model = gemma2.make_model(c, dtype)
  params = tuple(_init(c, k, dtype) for k in jax.random.split(jax.random.key(0), 3))
  batch, new = _BATCH.value, _NEW.value
  prompts, valid = _prompts(c, batch)
  hf = (hf_loop, _hf_models(hf_loop, c, params)) if hf_loop else None
  print(f"size={_SIZE.value} layers={c.num_layers} dtype={_DTYPE.value} batch={batch} "
        f"prompt={_MIN_PROMPT.value or _PROMPT.value}..{_PROMPT.value} new={new} "
        f"device={jax.devices()[0].platform} repeats={_REPEATS.value}")
  print("batch | decoding | models | seconds per call (prefill + decode, median) | "
        "new tokens per second")
  for one_at_a_time in ((True, False) if hf else (False,)):
    _limit(model, params, prompts, valid, new, one_at_a_time, hf)
  if _DRAFT.value:
    mixes = {}
    for a in map(float, _AGREEMENT.value):
      mix = lambda e, a=a: jax.tree.map(lambda x, y: (a * x + (1 - a) * y).astype(x.dtype),
                                        params[0], e)
      mixes[f"agreement {a:g}"] = ((model,) * 3, (params[0], mix(params[1]), mix(params[2])))
    _speculative(mixes, prompts, valid, new)
  if _STACK.value:
    _stacking(model, c, dtype, prompts, valid, batch, new)


def _hf_loop():
  """The HF loop module, or one line (exit status 2) naming the make target that installs what
  it imports."""
  try:
    import hf_compose_loop
  except ImportError as e:
    print(f"error: --hf needs torch and transformers ({e.name} is missing); they are not "
          "project dependencies: `make venv-hf` installs them into .venv", file=sys.stderr)
    sys.exit(2)
  return hf_compose_loop


def _hf_models(hf_loop, c: gemma2.Gemma2Config, params) -> list:
  """The 3 models exported with hf_export to a temp dir and loaded by transformers."""
  with tempfile.TemporaryDirectory() as tmp:
    dirs = [os.path.join(tmp, f"model{i}") for i in range(len(params))]
    for d, p in zip(dirs, params, strict=True):
      hf_export.write(d, c, p)
    return hf_loop.load(dirs)


def _limit(model, params, prompts, valid, new, one_at_a_time, hf):
  """Each model alone, the 3 composed and (with hf) the HF loop, alternating: the physical
  limit (the sum of the single-model times) beside composed decoding, and HF's tokens checked
  against ours. one_at_a_time: the B prompts at batch 1, one after another."""
  batch = prompts.shape[0]

  def run(ps):  # (tokens [B, N], lengths [B])
    go = lambda x, v: generate.generate(
        (model,) * len(ps), ps, x, v, np.full(x.shape[0], new), stop_at_eos=False,
        prefill_chunk=_CHUNK.value, spec=AUTHORS if len(ps) > 1 else PAPER)
    gens = ([go(x[None], v[None]) for x, v in zip(prompts, valid, strict=True)]
            if one_at_a_time else [go(prompts, valid)])
    return (jnp.concatenate([g.tokens_BxN for g in gens]),
            jnp.concatenate([g.lengths_B for g in gens]))

  fns = [lambda p=p: run((p,)) for p in params] + [lambda: run(params)]
  names = ["background alone", "expert 1 alone", "expert 2 alone"]
  threads = [int(t) for t in _HF_THREADS.value] if hf else []
  for t in threads:
    loop = hf[0].authors_loop if one_at_a_time else hf[0].batched_loop
    fns.append(lambda t=t, loop=loop: (hf[0].set_threads(t), loop(
        hf[1], np.asarray(prompts), np.asarray(valid), new))[1])
  outs, sec_FxR = _alternate(fns)
  # the limit counts the same tokens: every decode made B x N of them
  if any(int(lengths_B.sum()) != batch * new for _, lengths_B in outs[:4]):
    raise RuntimeError(f"a decode made other than {batch} x {new} tokens")
  limit_R = sec_FxR[:3].sum(axis=0)
  sec_F = np.median(sec_FxR, axis=1)
  label = f"1 (x{batch})" if one_at_a_time else str(batch)
  rows = [*zip(names, [1] * 3, sec_F[:3], strict=True),
          ("physical limit: the 3 alone, summed", 3, np.median(limit_R)),
          ("composed (ours)", 3, sec_F[3])]
  rows += [(f"composed, HF loop (authors'), {t or 'default'} threads", 3, sec)
           for t, sec in zip(threads, sec_F[4:], strict=True)]
  for name, k, sec in rows:
    print(f"{label} | {name} | {k} | {sec:.3f} | {batch * new / sec:.3g}")
  summary = f"{label}: composed / physical limit {_spread(limit_R / sec_FxR[3])} (goal >= 0.9)"
  for t, sec_R, tokens in zip(threads, sec_FxR[4:], outs[4:], strict=True):
    same = tokens == np.asarray(outs[3][0])
    summary += (f"; ours / HF loop ({t or 'default'} threads) {_spread(sec_R / sec_FxR[3])}"
                + (", its tokens equal to ours" if same.all() else
                   f", its tokens DIFFER at {int((~same).sum())} of {same.size} (rows "
                   f"{np.flatnonzero(~same.all(axis=1)).tolist()})"))
  print(summary)


def _stacking(model, c, dtype, prompts, valid, batch, new):
  """Per-model vs stacked (vmapped) composed greedy decoding of k models, alternating; the
  tokens are checked equal, the time only printed."""
  print("models k | per-model s | stacked s | per-model / stacked: median [min, max] | tokens")
  for k in map(int, _STACK.value):
    params = tuple(_init(c, key, dtype) for key in jax.random.split(jax.random.key(2), k))
    run = lambda flag, params=params, k=k: generate.generate(
        (model,) * k, params, prompts, valid, np.full(batch, new), stop_at_eos=False,
        prefill_chunk=_CHUNK.value, spec=AUTHORS, stack_models=flag).tokens_BxN
    (per_model, stacked), sec_FxR = _alternate([lambda run=run, f=f: run(f) for f in (False, True)])
    print(f"{k} | {np.median(sec_FxR[0]):.3f} | {np.median(sec_FxR[1]):.3f} | "
          f"{_spread(sec_FxR[0] / sec_FxR[1])} | "
          f"{'equal' if np.array_equal(per_model, stacked) else 'DIFFER'}")


def _on_checkpoints():
  """The speculative rows on local checkpoints and the first --batch prompts of --prompts."""
  if not _DRAFT.value or not _PROMPTS_FILE.value or _HF.value or _STACK.value:
    raise app.UsageError("--checkpoints times speculative decoding only: give --draft_len and "
                         "--prompts, not --hf or --stack_models")
  models, params = zip(*[gemma2.load(d, dtype=jnp.dtype(_DTYPE.value))
                          for d in _CHECKPOINTS.value], strict=True)
  model = models[0]
  sp = gemma2.load_tokenizer(_CHECKPOINTS.value[0], model)
  records = (metric_writer.read_rows(_PROMPTS_FILE.value)[:_BATCH.value]
             if os.path.isfile(_PROMPTS_FILE.value) else [])
  if not records or any("prompt" not in r for r in records):
    raise app.UsageError(f"--prompts={_PROMPTS_FILE.value!r}: need a jsonl file of records "
                         "with a 'prompt' field")
  seqs = [decoding.encode(sp, model.bos_id, r["prompt"]) for r in records]
  prompts, valid = decoding.left_pad(seqs, model.pad_id, 1, len(seqs))
  print(f"checkpoints={_CHECKPOINTS.value} dtype={_DTYPE.value} batch={len(seqs)} "
        f"prompt<={prompts.shape[1]} new={_NEW.value} device={jax.devices()[0].platform}")
  _speculative({"checkpoints": (models, params)}, prompts, valid, _NEW.value)


def _speculative(settings: dict, prompts, valid, new) -> list[dict]:
  """Plain vs speculative composed decoding of each setting's (models, params) (greedy, or
  sampling at --temperature), alternating; greedy tokens are checked equal, the time only
  printed. Rows (also appended to --out): seconds per call, drafts drafted and accepted per
  prompt, the call's acceptance fraction."""
  batch, temperature, rows = prompts.shape[0], _TEMPERATURE.value, []
  print(f"setting | plain s | speculative s (n={_DRAFT.value}, temperature={temperature:g}) | "
        "speedup: median [min, max] | drafts accepted | rounds / tokens")
  kw = dict(stop_at_eos=False, prefill_chunk=_CHUNK.value, spec=AUTHORS,
            greedy=not temperature, temperature=temperature or 1.0,
            key=jax.random.key(0) if temperature else None)
  for label, (ms, ps) in settings.items():
    plain = lambda ms=ms, ps=ps: generate.generate(ms, ps, prompts, valid, np.full(batch, new),
                                                   **kw)
    fast = lambda ms=ms, ps=ps: speculative.generate_speculative(
        ms, ps, prompts, valid, np.full(batch, new), draft_len=_DRAFT.value, **kw)
    (p, f), sec_FxR = _alternate([plain, fast])
    same = np.array_equal(p.tokens_BxN, f.gen.tokens_BxN) if not temperature else None
    rows.append(dict(setting=label, draft_len=_DRAFT.value, temperature=temperature,
                     batch=batch, new_tokens=new, device=jax.devices()[0].device_kind,
                     plain_s=sec_FxR[0], speculative_s=sec_FxR[1],
                     drafted_B=np.asarray(f.drafted_B), accepted_B=np.asarray(f.accepted_B),
                     acceptance=float(f.acceptance), rounds=int(f.num_rounds), same_tokens=same))
    print(f"{label} | {np.median(sec_FxR[0]):.3f} | {np.median(sec_FxR[1]):.3f} | "
          f"{_spread(sec_FxR[0] / sec_FxR[1])} | {float(f.acceptance):.2f} | "
          f"{int(f.num_rounds)} / {new}{' (TOKENS DIFFER)' if same is False else ''}")
  if _OUT.value:
    metric_writer.append_rows(_OUT.value, rows)
  return rows


if __name__ == "__main__":
  app.run(main)
