"""Training throughput of the fused (vmapped runs x lax.scan) step vs the slow way.

  python benchmarks/throughput.py                       # CPU: widths 128..1024, 1 and 8 runs
  python benchmarks/throughput.py --runs=1,8,64         # on a GPU

Prints run-steps/s, task samples/s and achieved GFLOP/s per width and run count, the machine's
measured matmul peak, and the slow way (one seed, one jitted call per step, the batch made by a
separate jitted call) with the fused/slow ratio measured in the same process. Timings are printed,
never asserted.
"""

import os
import time

import jax
from absl import app, flags

from compgen_jax import cli
from compgen_jax.analysis import report
from compgen_jax.training import loop, runs
from compgen_jax.training import step as step_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_WIDTHS = flags.DEFINE_list("widths", ["128", "256", "512", "1024"], "MLP widths (depth 4).")
_RUNS = flags.DEFINE_list("runs", ["1", "8"], "Numbers of vmapped runs.")
_STEPS = flags.DEFINE_integer("steps", 50, "Steps per timed chunk.")
_REPEATS = flags.DEFINE_integer("repeats", 2, "Timed chunks (best is reported).")


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


def step_gflop(cfg) -> float:
  """Analytic FLOPs of one training step of one run: 3x the student's forward matmuls."""
  samples = cfg.train.batch_size * cfg.task.num_samples
  dims = [cfg.task.num_modules + cfg.task.input_dim] + [cfg.student.width] * cfg.student.depth
  dims.append(cfg.task.output_dim)
  forward = sum(2 * a * b for a, b in zip(dims[:-1], dims[1:], strict=True)) * samples
  return 3 * forward / 1e9


def _state(cfg, num_runs: int):
  cfg.num_seeds = num_runs
  grid = runs.run_grid(cfg)
  grid = runs.precompute_splits(cfg, grid)
  keys, hparams = runs.run_inputs(cfg, grid)
  return loop.make_init(cfg)(keys, hparams)


def fused_steps_per_s(cfg, num_runs: int) -> float:
  state, bits = _state(cfg, num_runs), loop.task_bits(cfg)
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


def main(argv):
  del argv
  peak = matmul_peak_gflops()
  rows = []
  for width in map(int, _WIDTHS.value):
    cfg = cli.load_config_file(os.path.join(REPO, "configs", "hyperteacher.py") + ":paper")
    cfg.unlock()
    cfg.student.width = width
    slow = slow_steps_per_s(cfg)
    samples = cfg.train.batch_size * cfg.task.num_samples
    gflop = step_gflop(cfg)
    rows.append([width, 1, "slow", slow, slow * samples, slow * gflop, 1.0])
    for num_runs in map(int, _RUNS.value):
      fused = fused_steps_per_s(cfg, num_runs)
      rows.append([width, num_runs, "fused", fused, fused * samples, fused * gflop, fused / slow])
  print(f"device: {jax.devices()[0].device_kind} x{jax.device_count()}; "
        f"measured f32 matmul peak {peak:.1f} GFLOP/s")
  print(report.table(["width", "runs", "path", "run-steps/s", "samples/s", "GFLOP/s",
                      "vs slow"], rows))



if __name__ == "__main__":
  app.run(main)
