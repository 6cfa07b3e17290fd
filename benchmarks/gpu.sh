#!/usr/bin/env bash
# Training throughput on a GPU: MLP widths 256..2048 x vmapped runs 1..256, one process (so the
# init and slow-way compiles are shared), in under 5 minutes on an H100 / H200; prints the table.
#
#   benchmarks/gpu.sh                                    # the full grid
#   benchmarks/gpu.sh --precision=highest                # full float32 matmuls instead of TF32
#   benchmarks/gpu.sh --widths=64 --runs=1,2 --steps=5   # smoke test (any machine)
#
# Flags after the script name go to benchmarks/throughput.py and override the defaults below.
# Sizing (the paper's hyperteacher: depth-4 MLP on M + I = 16 + 16 inputs, 16 outputs, batch
# 128 tasks x 16 samples = 2048 samples): one run-step is 3 x 2 x 2048 x (3 w^2 + 48 w) FLOP =
# 2.6 / 10.0 / 39.3 / 155.8 GFLOP at w = 256 / 512 / 1024 / 2048, 207.6 GFLOP for the four, and
# x (1 + 8 + 32 + 64 + 128 + 256 = 489 runs) = 101.5 TFLOP per step of every configuration.
# Each configuration runs 1 + REPEATS = 4 chunks of STEPS = 10 steps: 4.1 PFLOP, 16 s at
# 250 TFLOP/s (TF32, about half an H100's dense peak), 80 s at 50 TFLOP/s (--precision=highest).
# Compiling the rest (24 chunks, 4 inits, 4 x 2 slow-way programs, seconds each) takes most of
# the budget; JAX's compilation cache (below) makes a second run faster. Width 2048 x 256 runs
# needs ~100 GB (throughput.run_gb); a configuration that does not fit is reported as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
LIMIT_S="${LIMIT_S:-290}"  # the benchmark's own deadline, within the 5 minutes
export XLA_PYTHON_CLIENT_MEM_FRACTION="${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.95}"
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-/tmp/compgen_jax_jit_cache}"

if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit \
      --format=csv
else
  echo "nvidia-smi: not found (no NVIDIA GPU here)"
fi
# Rows print as they are measured, so a run cut off by the timeout still shows what it got.
timeout --signal=INT --kill-after=10 "$LIMIT_S" "$PY" benchmarks/throughput.py \
    --widths=256,512,1024,2048 --runs=1,8,32,64,128,256 --steps=10 --repeats=3 "$@"
