"""Probe cost: one jitted ridge pass (all targets, vmapped over runs and layers, every lambda from
one eigendecomposition) vs the reference's approach, one target at a time in a Python loop, on the
same activations. Prints both times and the ratio; never asserts on time.

  python benchmarks/probe_cost.py                            # quick preset, freshly initialised
  python benchmarks/probe_cost.py --workdir=/tmp/ht_quick    # latest checkpoint of a workdir
"""

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags
from ml_collections import config_flags

from compgen_jax.scaling import passes, probes, runs
from compgen_jax.scaling import train as scaling_train
from compgen_jax.training import passes as engine_passes

_CONFIG = config_flags.DEFINE_config_file("config", "configs/hyperteacher.py:quick",
                                          "Config (used without --workdir).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Trained workdir (its latest checkpoint).")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed repeats of the jitted pass (best is kept).")


def _states(cfg_flag, workdir):
  if workdir:
    wd = passes.open_workdir(workdir)
    step = engine_passes.select_steps(wd.checkpoints, None, False)[0]
    return wd.cfg, engine_passes.restored(workdir, scaling_train.init_one(wd.cfg), wd.inputs,
                                          step)
  grid = runs.run_grid(cfg_flag)
  grid = runs.precompute_splits(cfg_flag, grid)
  return cfg_flag, scaling_train.make_init(cfg_flag)(*runs.run_inputs(cfg_flag, grid))


def loop_probe(x_id, x_ood, y_id, y_ood, lam: float) -> tuple[np.ndarray, np.ndarray]:
  """Reference style: for every run, layer and target column, its own centred ridge solve."""
  R, L, N, _ = x_id.shape
  half, K = N // 2, y_id.shape[-1]
  r2 = np.zeros((2, R, L, K), np.float32)
  for r in range(R):
    for l in range(L):
      xf, xt, xo = x_id[r, l, :half], x_id[r, l, half:], x_ood[r, l]
      mx = xf.mean(0)
      xc = xf - mx
      for k in range(K):
        y = y_id[r, :half, k]
        w = np.linalg.solve(xc.T @ xc + lam * np.eye(xc.shape[1], dtype=xc.dtype),
                            xc.T @ (y - y.mean()))
        for s, (x, t) in enumerate(((xt, y_id[r, half:, k]), (xo, y_ood[r, :, k]))):
          pred = (x - mx) @ w + y.mean()
          ss_tot = np.sum((t - t.mean()) ** 2)
          r2[s, r, l, k] = 1 - np.sum((t - pred) ** 2) / ss_tot if ss_tot > 0 else np.nan
  return r2[0], r2[1]


def main(argv):
  del argv
  cfg, states = _states(_CONFIG.value, _WORKDIR.value)
  bits_T = scaling_train.task_bits(cfg)
  data_fn = jax.jit(jax.vmap(lambda s, b: probes.probe_data(s, b, cfg)[0], in_axes=(0, None)))
  data = jax.block_until_ready(data_fn(states, bits_T))
  x_id, x_ood, y_id, y_ood = data
  lambdas = jnp.asarray(cfg.probe.lambdas, jnp.float32)
  score = jax.jit(jax.vmap(functools.partial(probes.score_layers, lambdas_A=lambdas)))
  t0 = time.perf_counter()
  jax.block_until_ready(score(*data))
  compile_s = time.perf_counter() - t0
  times = []
  for _ in range(_REPEATS.value):
    t0 = time.perf_counter()
    out = jax.block_until_ready(score(*data))
    times.append(time.perf_counter() - t0)
  fused = min(times)
  host = [np.asarray(a) for a in data]
  t0 = time.perf_counter()
  ref_id, ref_ood = loop_probe(*host, float(lambdas[0]))
  looped = time.perf_counter() - t0
  diff = max(np.nanmax(np.abs(np.asarray(out[s])[:, :, 0] - ref))
             for s, ref in (("id", ref_id), ("ood", ref_ood)))
  R, L, N, D = x_id.shape
  print(f"activations: {R} runs x {L} layers x {N} ID + {x_ood.shape[2]} OOD tasks x D={D} "
        f"(zero-padded), {y_id.shape[-1]} target columns, {len(lambdas)} lambda(s); "
        f"{jax.devices()[0].platform}")
  print(f"fitted probes: {R * L * y_id.shape[-1] * len(lambdas)}")
  print(f"jitted all-targets pass : {fused * 1e3:9.1f} ms  (best of {_REPEATS.value}; compile "
        f"{compile_s:.1f} s)")
  print(f"per-target Python loop : {looped * 1e3:9.1f} ms  (numpy, lambda={float(lambdas[0])})")
  print(f"ratio loop / jitted    : {looped / fused:9.1f}x")
  print(f"max |R^2 difference|   : {diff:.2e}")


if __name__ == "__main__":
  app.run(main)
