"""Where a training step's time goes, against the matmul peak (the profile behind throughput.py).

  python benchmarks/step_breakdown.py --widths=512,1024 --runs=1,8
  python benchmarks/step_breakdown.py --widths=64,128,256 --runs=8 --strategies=auto,vmap

Per width, run count and strategy, each part timed as its own jitted lax.scan of --steps steps
over the runs as training steps them (training.chunk.over_runs: vmapped, or one run after another;
one run is the plain program): `step` the whole training step; `data` drawing the batch
(teacher / task sampling) alone; `update` forward, backward and AdamW on a fixed batch; `matmuls`
only the student's forward and backward matmuls at the step's shapes (3 per layer: the floor no
implementation of this MLP can go under). Prints ms per run-step and GFLOP/s of each, and the
shares of the step; printed, never asserted.
"""

import os
import sys
import time

import jax
import jax.numpy as jnp
from absl import app

from compgen_jax import cli
from compgen_jax.analysis import report
from compgen_jax.scaling import runs
from compgen_jax.scaling import step as step_lib
from compgen_jax.scaling import train as scaling_train
from compgen_jax.training import chunk as chunk_lib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import throughput  # noqa: E402  (benchmarks/ is scripts, not a package)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the flags are throughput.py's (--widths, --runs, --steps, --repeats, --strategies), defined on
# its import
_WIDTHS, _RUNS, _STEPS, _REPEATS, _STRATEGIES = (
    throughput._WIDTHS, throughput._RUNS, throughput._STEPS, throughput._REPEATS,
    throughput._STRATEGIES)


def _best(fn, *args) -> float:
  out = fn(*args)
  jax.block_until_ready(out)
  best = float("inf")
  for _ in range(_REPEATS.value):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    best = min(best, time.perf_counter() - start)
  return best


def _scanned(body, num_runs, strategy):
  """jit(runs of scan of `body` over steps): body(carry) -> carry, the runs as `strategy` steps
  them (step.over_runs)."""
  def one(carry, _):
    return jax.lax.scan(lambda c, _: (body(c), None), carry, length=_STEPS.value)[0]
  if num_runs == 1:
    return jax.jit(lambda carry: one(carry, None))
  runs_fn = chunk_lib.over_runs(one, strategy)
  return jax.jit(lambda carry: runs_fn(carry, None))


def _draw(state_acc, bits, cfg):
  """Draws the step's batch and folds every element into a float carry (so none of it is dead
  code), then advances the step (a new batch each time)."""
  state, acc = state_acc
  leaves = jax.tree.leaves(step_lib.train_batch(state, bits, cfg))
  acc = acc + sum(jnp.sum(x.astype(jnp.float32)) for x in leaves)
  return state.replace(step=state.step + 1), acc


def parts(cfg, num_runs: int, strategy: str) -> dict[str, float]:
  """Seconds per run-step of each part."""
  cfg.num_seeds = 1
  grid = runs.precompute_splits(cfg, runs.run_grid(cfg))
  keys, hparams = runs.run_inputs(cfg, grid)
  state = jax.tree.map(lambda a: a[0], scaling_train.make_init(cfg)(keys, hparams))
  bits = scaling_train.task_bits(cfg)
  batch = step_lib.train_batch(state, bits, cfg)
  if num_runs > 1:
    rep = lambda t: jax.tree.map(lambda a: jnp.repeat(a[None], num_runs, axis=0), t)
    state, batch = rep(state), rep(batch)
    strategy = chunk_lib.resolve(strategy, state.params)  # "auto" -> "vmap" or "map"
  samples = cfg.train.batch_size * cfg.task.num_samples
  mlp = cfg.student.mlp
  dims = ([cfg.task.num_modules + cfg.task.input_dim] + [mlp.width] * mlp.depth
          + [cfg.task.output_dim])
  ws = [jnp.full((a, b), 0.01, jnp.float32) for a, b in zip(dims[:-1], dims[1:], strict=True)]
  x = jnp.ones((samples, dims[0]), jnp.float32)
  if num_runs > 1:
    ws = [jnp.repeat(w[None], num_runs, axis=0) for w in ws]
    x = jnp.repeat(x[None], num_runs, axis=0)

  def matmuls(carry):
    x, ws = carry
    hs = [x]
    for w in ws:  # forward
      hs.append(hs[-1] @ w)
    g = hs[-1]
    new = []
    for w, h in zip(ws[::-1], hs[-2::-1], strict=True):  # backward: dW = h^T g, dh = g W^T
      new.append(w - 1e-9 * (h.T @ g))
      g = g @ w.T
    return x + 1e-9 * g, new[::-1]

  steps = _STEPS.value * num_runs
  out = {
      "step": _best(_scanned(lambda s: step_lib.train_step(s, bits, cfg)[0], num_runs,
                             strategy), state),
      "data": _best(_scanned(lambda sa: _draw(sa, bits, cfg), num_runs, strategy),
                    (state, jnp.zeros(state.step.shape, jnp.float32))),
      "update": _best(_scanned(lambda sb: (step_lib.update(sb[0], sb[1], cfg)[0], sb[1]),
                               num_runs, strategy), (state, batch)),
      "matmuls": _best(_scanned(matmuls, num_runs, strategy), (x, ws)),
  }
  return {k: v / steps for k, v in out.items()}


def main(argv):
  del argv
  peak = throughput.matmul_peak_gflops()
  print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}; measured f32 matmul peak "
        f"{peak:.1f} GFLOP/s", flush=True)
  rows = []
  for width in map(int, _WIDTHS.value):
    cfg = cli.load_config_file(os.path.join(REPO, "configs", "hyperteacher.py") + ":paper")
    cfg.unlock()
    cfg.student.mlp.width = width
    gflop = throughput.step_gflop(cfg)
    for num_runs, strategy in [(r, s) for r in map(int, _RUNS.value)
                               for s in (["one run"] if r == 1 else _STRATEGIES.value)]:
      t = parts(cfg, num_runs, strategy)
      for name in ("step", "data", "update", "matmuls"):
        rows.append([width, num_runs, strategy, name, 1e3 * t[name], gflop / t[name],
                     gflop / t[name] / peak, t[name] / t["step"]])
        print("  " + "  ".join(f"{v:.4g}" if isinstance(v, float) else str(v)
                               for v in rows[-1]), flush=True)
  print(report.table(["width", "runs", "strategy", "part", "ms per run-step", "GFLOP/s (student)",
                      "of peak", "share of step"], rows))


if __name__ == "__main__":
  app.run(main)
