"""Process start to the first training chunk, cold and warm persistent compilation cache.

  python benchmarks/startup.py                       # quick preset, a fresh cache in a temp dir
  python benchmarks/startup.py --config=configs/hyperteacher.py:paper

Runs experiments/train.py as a user would (`--compilation_cache=DIR`), with a first chunk of a
few steps; the first training rows are appended to metrics.jsonl right after the first chunk (no
evaluation there), so the file's appearance marks the end of the first training chunk.
Printed, never asserted.
"""

import os
import subprocess
import sys
import tempfile
import time

from absl import app, flags

_CONFIG = flags.DEFINE_string("config", "configs/hyperteacher.py:quick", "Train config spec.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Runs on the warm cache (the best is reported).")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHUNK = 10


def first_chunk_seconds(cache: str, workdir: str) -> tuple[float, float]:
  """(seconds to the end of the first chunk, seconds for the whole short run)."""
  args = [sys.executable, os.path.join(REPO, "experiments", "train.py"),
          f"--config={_CONFIG.value}", f"--workdir={workdir}", f"--compilation_cache={cache}",
          f"--config.train.chunk_size={CHUNK}", f"--config.train.log_every={CHUNK}",
          f"--config.train.num_steps={2 * CHUNK}", f"--config.evals.id.every={2 * CHUNK}",
          f"--config.evals.ood.every={2 * CHUNK}",
          f"--config.train.checkpoint_every={2 * CHUNK}", "--config.optim.warmup_steps=5",
          "--config.train.progress=False"]
  metrics = os.path.join(workdir, "metrics.jsonl")
  start = time.perf_counter()
  proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  first = None
  while proc.poll() is None:
    if first is None and os.path.exists(metrics):
      first = time.perf_counter() - start
    time.sleep(0.01)
  if proc.returncode:
    raise SystemExit(proc.stderr.read().decode()[-2000:])
  return first if first is not None else float("nan"), time.perf_counter() - start


def main(argv):
  del argv
  with tempfile.TemporaryDirectory() as tmp:
    cache = os.path.join(tmp, "cache")
    rows = [("cold", *first_chunk_seconds(cache, os.path.join(tmp, "cold")))]
    warm = [first_chunk_seconds(cache, os.path.join(tmp, f"warm{i}"))
            for i in range(_REPEATS.value)]
    rows.append(("warm (best)", *min(warm)))
  print(f"{_CONFIG.value}: process start -> end of the first {CHUNK}-step chunk")
  print(f"{'cache':>12}  {'first chunk s':>13}  {'whole run s':>11}")
  for name, first, total in rows:
    print(f"{name:>12}  {first:13.2f}  {total:11.2f}")


if __name__ == "__main__":
  app.run(main)
