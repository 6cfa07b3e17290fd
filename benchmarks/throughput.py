"""Training throughput of the fused (vmapped runs x lax.scan) step vs the slow way.

  python benchmarks/throughput.py                       # CPU: widths 128..1024, 1 and 8 runs
  python benchmarks/throughput.py --runs=1,8,64         # on a GPU
  benchmarks/gpu.sh                                     # GPU: widths 256..2048 x runs 1..256

Prints run-steps/s, task samples/s and achieved GFLOP/s per width and run count (a line as each
is measured, then the table), the machine's measured matmul peak, and the slow way (one seed, one
jitted call per step, the batch made by a separate jitted call) with the fused/slow ratio measured
in the same process. Timings are printed, never asserted. A configuration whose estimated memory
exceeds the device's, or that runs out of it, is reported as skipped and the others go on.
"""

import os
import time

import jax
import jax.numpy as jnp
from absl import app, flags

from compgen_jax import cli
from compgen_jax.analysis import report
from compgen_jax.training import loop, runs
from compgen_jax.training import step as step_lib

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
  dims = [cfg.task.num_modules + cfg.task.input_dim] + [cfg.student.width] * cfg.student.depth
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
  return loop.make_init(cfg)(keys, hparams)


def fused_steps_per_s(cfg, one_run, num_runs: int) -> float:
  """Run-steps/s of the chunk over `num_runs` copies of the run `one_run` (copies, so the init is
  compiled once per width; the chunk's cost does not depend on the seeds)."""
  state = jax.tree.map(lambda a: jnp.repeat(a, num_runs, axis=0), one_run)
  bits = loop.task_bits(cfg)
  chunk = step_lib.make_train_chunk(cfg, _STEPS.value)
  state, _, _ = chunk(state, bits)
  jax.block_until_ready(state)
  best = float("inf")
  for _ in range(_REPEATS.value):
    start = time.perf_counter()
    state, metrics, _ = chunk(state, bits)
    jax.block_until_ready(metrics)
    best = min(best, time.perf_counter() - start)
  return _STEPS.value * num_runs / best


def slow_steps_per_s(cfg) -> float:
  """One run, one jitted update per step, its batch from a separate jitted call."""
  state = jax.tree.map(lambda a: a[0], _state(cfg, 1))
  bits = loop.task_bits(cfg)
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


def measure_width(cfg, width: int, limit_gb: float | None, rows: list[list],
                  peak: float) -> None:
  """Appends the table rows of one width to `rows` as each is measured: the slow way, then each
  run count."""
  cfg.student.width = width
  samples, gflop = cfg.train.batch_size * cfg.task.num_samples, step_gflop(cfg)
  slow = slow_steps_per_s(cfg) if _SLOW.value else float("nan")
  if _SLOW.value:
    rows.append([width, 1, "slow", slow, slow * samples, slow * gflop, 1.0,
                 *_versus(slow, width, gflop, peak), ""])
  one_run = _state(cfg, 1)
  for num_runs in map(int, _RUNS.value):
    need = num_runs * run_gb(cfg)
    if limit_gb is not None and need > limit_gb:
      row = [width, num_runs, "fused"] + [float("nan")] * 6 + [
          f"skipped: needs ~{need:.3g} of {limit_gb:.3g} GB"]
    else:
      try:
        fused = fused_steps_per_s(cfg, one_run, num_runs)
        row = [width, num_runs, "fused", fused, fused * samples, fused * gflop, fused / slow,
               *_versus(fused, width, gflop, peak), ""]
      except jax.errors.JaxRuntimeError as e:
        if not _out_of_memory(e):
          raise
        row = [width, num_runs, "fused"] + [float("nan")] * 6 + ["out of memory"]
    print("  " + "  ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row),
          flush=True)
    rows.append(row)
  return rows


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
  print(report.table(["width", "runs", "path", "run-steps/s", "samples/s", "GFLOP/s",
                      "vs slow", "of peak", "vs ref", "note"], rows))


if __name__ == "__main__":
  app.run(main)
