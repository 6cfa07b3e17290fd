"""Programs at once on a small CPU: one sweep run with --parallel=1, then with --parallel=P.

  python benchmarks/core_sharing.py                          # 4 programs, 1000 steps, P = 2
  python benchmarks/core_sharing.py --programs=6 --steps=2000 --rounds=2

The sweep is the cpu data-scaling student (MLP 4x128 at M=16, K=3, batch 128 x 16, 2 seeds
vmapped, the cpu presets' recipe at --steps steps; grid.cpu_fitting_recipe) with one held-out
fraction per program, so its programs cost alike. Each round runs it through the real binary
(experiments/sweep.py, the local launcher) into fresh temporary sweep dirs, once at --parallel=1
and once at --parallel=P (each program on its own share of the cores: launch.core_shares), and
times the whole sweep, process start-up, compilation, evaluation and checkpoints included. Prints
the elapsed seconds of each, the best round's ratio, and whether both wrote the same metrics (a
program pinned to one core sums in another order than one on two, so they differ in the last
digits: not asserted). Timings are printed, never asserted; nothing else should run beside it.
"""

import os
import subprocess
import sys
import tempfile
import time

from absl import app, flags

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FRACS = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)

_PROGRAMS = flags.DEFINE_integer("programs", 4, "Programs in the sweep (one held-out fraction "
                                 f"each, at most {len(FRACS)}).", lower_bound=1,
                                 upper_bound=len(FRACS))
_STEPS = flags.DEFINE_integer("steps", 1000, "Training steps per program.", lower_bound=100)
_PARALLEL = flags.DEFINE_integer("parallel", 2, "Programs at once in the second way.",
                                 lower_bound=2)
_ROUNDS = flags.DEFINE_integer("rounds", 1, "Rounds (each runs both ways; the best is kept).",
                               lower_bound=1)

SWEEP = '''
import ml_collections
from compgen_jax.scaling import grid


def get_config(preset="bench"):
  cfg = ml_collections.ConfigDict()
  cfg.name = "core_sharing"
  cfg.base = "configs/hyperteacher.py:quick"
  recipe = grid.cpu_fitting_recipe()
  recipe["train"].update(num_steps={steps}, checkpoint_every={steps}, progress=False)
  recipe["evals"] = {{"id": {{"every": {steps}}}, "ood": {{"every": {steps}}}}}
  cfg.overrides = {{"num_seeds": 2, "student": {{"mlp": {{"width": 128, "depth": 4}}}},
                   "task": {{"num_modules": 16, "max_hotness": 3}}, **recipe}}
  cfg.programs = tuple({{"sweep.frac_ood": (f,)}} for f in {fracs})
  return cfg
'''


def _sweep(config: str, sweep_dir: str, parallel: int) -> float:
  start = time.perf_counter()
  result = subprocess.run([sys.executable, os.path.join(REPO, "experiments", "sweep.py"),
                           f"--config={config}:bench", f"--sweep_dir={sweep_dir}",
                           f"--parallel={parallel}"], cwd=REPO, capture_output=True,
                          text=True, check=False)
  if result.returncode:
    raise SystemExit(f"sweep failed (--parallel={parallel}):\n{result.stderr[-3000:]}")
  return time.perf_counter() - start


def _final_rows(sweep_dir: str) -> list:
  rows = []
  for name in sorted(os.listdir(sweep_dir)):
    path = os.path.join(sweep_dir, name, workdir_lib.METRICS_FILE)
    if os.path.exists(path):
      rows += [{k: v for k, v in r.items() if k.startswith(("id/", "ood/"))}
               for r in metric_writer.read_rows(path) if r["step"] == _STEPS.value]
  return rows


def main(argv):
  del argv
  cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
  ways = (1, _PARALLEL.value)
  best = dict.fromkeys(ways, float("inf"))
  with tempfile.TemporaryDirectory() as tmp:
    config = os.path.join(tmp, "core_sharing_sweep.py")
    with open(config, "w") as f:
      f.write(SWEEP.format(steps=_STEPS.value, fracs=FRACS[:_PROGRAMS.value]))
    rows = {}
    for r in range(_ROUNDS.value):
      for parallel in ways:
        sweep_dir = os.path.join(tmp, f"round{r}_parallel{parallel}")
        best[parallel] = min(best[parallel], _sweep(config, sweep_dir, parallel))
        rows[parallel] = _final_rows(sweep_dir)
        print(f"round {r}: --parallel={parallel}: {best[parallel]:.1f} s", flush=True)
  run_steps = _PROGRAMS.value * 2 * _STEPS.value
  print(f"\n{_PROGRAMS.value} programs x 2 seeds x {_STEPS.value} steps (MLP 4x128, M=16, "
        f"K=3) on {cores} cores; best of {_ROUNDS.value} round(s)\n")
  print("| programs at once | elapsed (s) | run-steps/s | vs one at a time |")
  print("|---:|---:|---:|---:|")
  for parallel in ways:
    print(f"| {parallel} | {best[parallel]:.1f} | {run_steps / best[parallel]:.1f} | "
          f"{best[1] / best[parallel]:.2f}x |")
  print(f"\nsame final metrics both ways: {rows[ways[0]] == rows[ways[1]]}")


if __name__ == "__main__":
  app.run(main)
