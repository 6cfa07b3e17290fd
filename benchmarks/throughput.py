"""Training throughput of the fused (runs x lax.scan) chunk vs one run and vs the slow way.

  python benchmarks/throughput.py                       # CPU: widths 128..1024, 1 and 8 runs
  python benchmarks/throughput.py --runs=2,8,32 --strategies=auto,vmap   # both ways of R runs
  python benchmarks/throughput.py --runs=1,8,64         # on a GPU
  benchmarks/gpu.sh                                     # GPU: widths 256..2048 x runs 1..256

Prints run-steps/s, task samples/s and achieved GFLOP/s per width, run count and strategy (the
chunk's way of stepping its runs: training.chunk.over_runs; the lines of a width as it is done,
then the table), the machine's measured matmul peak, the one-run program, and the slow way (one
seed, one jitted call per step, the batch made by a separate jitted call). "vs 1 run" is a
chunk's run-steps/s over the one-run program's: R runs in one program against R programs of one
run. The chunks of a width are timed in rounds, each timing every chunk once (A B A B ...), so
the load of a shared machine falls on all alike. Timings are printed, never asserted. A
configuration whose estimated memory exceeds the device's, or that runs out of it, is reported as
skipped and the others go on.
"""

import os
import time

import jax
import jax.numpy as jnp
from absl import app, flags

from compgen_jax import cli
from compgen_jax.analysis import report
from compgen_jax.scaling import runs
from compgen_jax.scaling import step as step_lib
from compgen_jax.scaling import train as scaling_train
from compgen_jax.training import chunk as chunk_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# --precision -> jax_default_matmul_precision (float32 matmuls; "default" is TF32 on recent GPUs)
PRECISIONS = {"default": None, "bf16": "bfloat16", "tf32": "tensorfloat32", "high": "high",
              "highest": "highest"}

# The reference implementation's (smonsays/scale-compositionality) single-run steps/s at this
# setting (M=16, K=3, batch 128 tasks x 16 samples, MLP depth 4), measured on the project's 2-core
# development CPU with processes alternating (the table of the performance issue). Only meaningful
# on that machine class; printed as "vs ref" on CPUs.
REFERENCE_CPU_STEPS_PER_S = {256: 42.1, 512: 10.4, 1024: 3.12}

_WIDTHS = flags.DEFINE_list("widths", ["128", "256", "512", "1024"], "MLP widths (depth 4).")
_RUNS = flags.DEFINE_list("runs", ["1", "8"], "Numbers of vmapped runs.")
_STEPS = flags.DEFINE_integer("steps", 50, "Steps per timed chunk.")
_REPEATS = flags.DEFINE_integer("repeats", 2, "Timed chunks (best is reported).")
_PRECISION = flags.DEFINE_enum("precision", "default", list(PRECISIONS), "Precision of float32 "
                               "matmuls (jax_default_matmul_precision).")
_STRATEGIES = flags.DEFINE_list("strategies", ["auto"], "How a chunk steps its runs "
                                 f"(training.chunk.STRATEGIES: {', '.join(chunk_lib.STRATEGIES)}).")
_SLOW = flags.DEFINE_bool("slow", True, "Also time the slow way (one run per width).")


def matmul_peak_gflops(n: int = 2048, repeats: int = 5) -> float:
  """Best float32 GFLOP/s of an n x n matmul on the default device."""
  a = jax.random.normal(jax.random.key(0), (n, n))
  f = jax.jit(lambda x: x @ x)
  f(a).block_until_ready()
  best = min(_timed(lambda: f(a).block_until_ready()) for _ in range(repeats))
  return 2 * n**3 / best / 1e9


def _timed(fn) -> float:
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def _mlp_dims(cfg) -> list[int]:
  mlp = cfg.student.mlp
  dims = [cfg.task.num_modules + cfg.task.input_dim] + [mlp.width] * mlp.depth
  return dims + [cfg.task.output_dim]


def step_gflop(cfg) -> float:
  """Analytic FLOPs of one training step of one run: 3x the student's forward matmuls."""
  samples = cfg.train.batch_size * cfg.task.num_samples
  dims = _mlp_dims(cfg)
  forward = sum(2 * a * b for a, b in zip(dims[:-1], dims[1:], strict=True)) * samples
  return 3 * forward / 1e9


def run_gb(cfg) -> float:
  """Rough device memory of one run in a chunk: parameters, gradients and two Adam moments, and
  the activations kept for the backward pass (3 per sample and layer), all float32."""
  dims = _mlp_dims(cfg)
  params = sum(a * b + b for a, b in zip(dims[:-1], dims[1:], strict=True))
  activations = 3 * cfg.train.batch_size * cfg.task.num_samples * sum(dims[1:])
  return 4 * (4 * params + activations) / 1e9


def device_gb() -> float | None:
  """The memory the default device can allocate (None where it does not say, e.g. a CPU)."""
  stats = jax.devices()[0].memory_stats() or {}
  return stats["bytes_limit"] / 1e9 if "bytes_limit" in stats else None


def _state(cfg, num_runs: int):
  cfg.num_seeds = num_runs
  grid = runs.run_grid(cfg)
  grid = runs.precompute_splits(cfg, grid)
  keys, hparams = runs.run_inputs(cfg, grid)
  return scaling_train.make_init(cfg)(keys, hparams)


def _copies(one_run, num_runs: int):
  return jax.tree.map(lambda a: jnp.repeat(a, num_runs, axis=0), one_run)


def _chunks(cfg, one_run, counts: list[int], strategies: list[str]) -> dict:
  """{(runs, strategy): [chunk, state]} compiled and warmed: the one-run program (runs 1, path
  "one run") and, per run count > 1 and strategy, the chunk over that many copies of `one_run`
  (copies, so the init is compiled once per width; the chunk's cost does not depend on the
  seeds)."""
  bits = scaling_train.task_bits(cfg)
  solo = jax.jit(lambda s, b: chunk_lib.scan_one_run(
      s, b, step=scaling_train.step_one(cfg), length=_STEPS.value), donate_argnums=0)
  out = {(1, "one run"): [solo, jax.tree.map(lambda a: a[0], one_run)]}
  for num_runs in counts:
    for strategy in strategies:
      chunk = scaling_train.make_chunk(cfg, _STEPS.value, strategy)
      out[num_runs, strategy] = [chunk, _copies(one_run, num_runs)]
  for entry in out.values():
    entry[1] = entry[0](entry[1], bits)[0]
    jax.block_until_ready(entry[1])
  return out


def fused_steps_per_s(cfg, chunks: dict) -> dict:
  """Run-steps/s of every chunk, best of --repeats rounds; each round times every chunk once, one
  after another (A B C A B C ...), so the load of a shared machine falls on all alike."""
  bits, best = scaling_train.task_bits(cfg), dict.fromkeys(chunks, float("inf"))
  for _ in range(_REPEATS.value):
    for key, entry in chunks.items():
      start = time.perf_counter()
      entry[1], metrics, _ = entry[0](entry[1], bits)
      jax.block_until_ready(metrics)
      best[key] = min(best[key], time.perf_counter() - start)
  return {(r, strategy): _STEPS.value * r / t for (r, strategy), t in best.items()}


def slow_steps_per_s(cfg) -> float:
  """One run, one jitted update per step, its batch from a separate jitted call."""
  state = jax.tree.map(lambda a: a[0], _state(cfg, 1))
  bits = scaling_train.task_bits(cfg)
  draw = jax.jit(lambda s: step_lib.train_batch(s, bits, cfg))
  update = jax.jit(lambda s, b: step_lib.update(s, b, cfg)[0])
  state = update(state, draw(state))
  jax.block_until_ready(state)
  best = float("inf")
  for _ in range(_REPEATS.value):
    start = time.perf_counter()
    for _ in range(_STEPS.value):
      state = update(state, draw(state))
    jax.block_until_ready(state)
    best = min(best, time.perf_counter() - start)
  return _STEPS.value / best


def _out_of_memory(e: Exception) -> bool:
  return "RESOURCE_EXHAUSTED" in str(e) or "out of memory" in str(e).lower()


def _versus(rate: float, width: int, gflop: float, peak: float) -> list:
  """Fraction of the measured matmul peak, and the ratio to the reference's steps/s (CPU only)."""
  ref = REFERENCE_CPU_STEPS_PER_S.get(width) if jax.default_backend() == "cpu" else None
  return [rate * gflop / peak, rate / ref if ref else float("nan")]


def _row(width, num_runs, path, rate, samples, gflop, peak, slow, one, note=""):
  return [width, num_runs, path, rate, rate * samples, rate * gflop, rate / slow, rate / one,
          *_versus(rate, width, gflop, peak), note]


def measure_width(cfg, width: int, limit_gb: float | None, rows: list[list],
                  peak: float) -> None:
  """Appends the table rows of one width to `rows`: the slow way, the one-run program, then each
  run count > 1 with each strategy."""
  cfg.student.mlp.width = width
  samples, gflop = cfg.train.batch_size * cfg.task.num_samples, step_gflop(cfg)
  slow = slow_steps_per_s(cfg) if _SLOW.value else float("nan")
  counts, skipped = [], []
  for num_runs in sorted({int(r) for r in _RUNS.value} - {1}):
    need = num_runs * run_gb(cfg)
    (counts if limit_gb is None or need <= limit_gb else skipped).append((num_runs, need))
  counts = [r for r, _ in counts]
  try:
    rates = fused_steps_per_s(cfg, _chunks(cfg, _state(cfg, 1), counts, _STRATEGIES.value))
  except jax.errors.JaxRuntimeError as e:
    if not _out_of_memory(e):
      raise
    rows.append([width, "", "fused"] + [float("nan")] * 7 + ["out of memory"])
    return
  one = rates[1, "one run"]
  if _SLOW.value:
    rows.append(_row(width, 1, "slow", slow, samples, gflop, peak, slow, one))
  for (num_runs, path), rate in rates.items():
    rows.append(_row(width, num_runs, path, rate, samples, gflop, peak, slow, one))
  for num_runs, need in skipped:
    rows.append([width, num_runs, "fused"] + [float("nan")] * 7 + [
        f"skipped: needs ~{need:.3g} of {limit_gb:.3g} GB"])
  for row in rows[-len(rates) - len(skipped) - _SLOW.value:]:
    print("  " + "  ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row),
          flush=True)


def main(argv):
  del argv
  if PRECISIONS[_PRECISION.value]:
    jax.config.update("jax_default_matmul_precision", PRECISIONS[_PRECISION.value])
  print(f"jax {jax.__version__}, devices {jax.devices()}; matmul precision "
        f"{_PRECISION.value}", flush=True)
  peak = matmul_peak_gflops()
  print(f"device: {jax.devices()[0].device_kind} x{jax.device_count()}; "
        f"measured f32 matmul peak {peak:.1f} GFLOP/s", flush=True)
  limit_gb = device_gb()
  rows = []
  try:
    for width in map(int, _WIDTHS.value):
      cfg = cli.load_config_file(os.path.join(REPO, "configs", "hyperteacher.py") + ":paper")
      cfg.unlock()
      measure_width(cfg, width, limit_gb, rows, peak)
  except KeyboardInterrupt:  # e.g. gpu.sh's timeout: the table of what was measured
    print("interrupted; the table has the configurations measured so far", flush=True)
  print(f"strategy auto (training.chunk.runs_one_after_another): map on one CPU device when a "
        f"run's largest weight has >= {chunk_lib.MAP_MIN_WEIGHTS} entries, else vmap; load "
        f"average {os.getloadavg()[0]:.2f}", flush=True)
  print(report.table(["width", "runs", "path", "run-steps/s", "samples/s", "GFLOP/s",
                      "vs slow", "vs 1 run", "of peak", "vs ref", "note"], rows))


if __name__ == "__main__":
  app.run(main)
