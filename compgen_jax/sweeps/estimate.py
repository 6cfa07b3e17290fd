"""--estimate: each program of a sweep with its runs, steps, student parameters and training time
from measured step rates, timed here (a short jitted chunk per distinct program shape) or read
from a --rates file. Builds and validates the programs as a launch does; writes nothing there.

Timing reuses the training code (run_grid, precompute_splits, make_init, make_train_chunk) and
counts training steps only: evaluation, checkpoints and host work between chunks are left out.
"""

import json
import math
import os
import time
import warnings
from typing import NamedTuple

import jax
import ml_collections
import numpy as np

from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import report
from compgen_jax.scaling import runs
from compgen_jax.scaling import train as scaling_train
from compgen_jax.sweeps import spec as spec_lib
from compgen_jax.training import loop
from compgen_jax.types import ConfigError

TIMED_STEPS = 20  # steps per timed chunk; compilation does not grow with it (lax.scan)
MIN_TIMED_S = 1.0  # a chunk faster than this is repeated (best of), up to MAX_REPEATS
MAX_REPEATS = 5
# Runs cost linearly on a CPU, so a few of a program's runs give its rate there; an accelerator
# runs them in parallel, so it times them all.
CPU_MAX_RUNS = 2
BUDGET_S = 240.0
# Config fields that change neither a step's shapes nor its cost: programs differing only in
# these share one timing.
NOT_SHAPE = ("seed", "num_seeds", "sweep.", "task.frac_ood", "task.support", "probe.", "evals.",
             "train.num_steps", "train.eval_every", "train.checkpoint_every", "train.chunk_size",
             "train.max_checkpoints", "train.progress", "train.eval_tasks", "train.evaluators",
             "train.log_every")


class Row(NamedTuple):
  name: str
  runs: int
  steps: int
  params: int  # of one run's student
  steps_per_s: float | None  # steps of the whole (vmapped) program per second
  source: str  # how steps_per_s was obtained (see SOURCES)


SOURCES = {"timed": "timed with all its runs (or a program of the same shape)",
           "timed k/R": "timed with k of its R runs, scaled by R/k (runs cost linearly on a CPU)",
           "fit": "time per run-step interpolated in the parameter count between timed shapes of "
                  "the same task family and student",
           "extrapolated": "as fit, outside the timed shapes' parameter counts (the smallest's "
                           "time below them, a line through them above)",
           "file": "from the --rates file",
           "-": "not measured"}


def program_configs(spec: str, sweep_dir: str) -> list[tuple[str, ml_collections.ConfigDict]]:
  """(name, train config) of every program, validated by spec.load as a launch does."""
  sweep = spec_lib.load(spec, sweep_dir)
  if sweep.app != "scaling":
    raise ConfigError("estimate", f"--estimate times the scaling experiment's programs; {spec} "
                      f"runs {sweep.app} programs")
  return [(p.name, p.config) for p in sweep.programs]


def shape_key(cfg: ml_collections.ConfigDict) -> str:
  """The config without the NOT_SHAPE fields and the subsections of the students it does not
  train (the registry hands a student only its own), as text: equal keys, equal step cost per
  run."""
  unused = tuple(f"student.{name}." for name in cfg.student
                 if name not in ("name", cfg.student.name))
  flat = workdir_lib.flatten(cfg)
  kept = {k: v for k, v in flat.items()
          if not any(k == n or k.startswith(n) for n in NOT_SHAPE + unused)}
  return json.dumps(kept, sort_keys=True, default=str)


def family(cfg: ml_collections.ConfigDict) -> tuple[str, str]:
  """Shapes whose time per run-step is interpolated from each other by parameter count (an
  encoding's cost is its first layer's, in the count)."""
  return cfg.task.family, cfg.student.name


def param_count(cfg: ml_collections.ConfigDict) -> int:
  """Parameters of one run's student, from jax.eval_shape of the init (nothing allocated)."""
  state = scaling_train.abstract_state(cfg, runs.run_grid(cfg)[:1])
  return loop.count_params(state.params)


def work(cfg: ml_collections.ConfigDict) -> int:
  """A program's training cost up to a factor shared by programs of one `family`: runs x steps x
  student parameters. A proxy: a step also draws its batch, at a cost that does not grow with
  the parameters, so the order it gives is exact between programs of equal runs x steps and
  approximate between others."""
  return len(runs.run_grid(cfg)) * cfg.train.num_steps * param_count(cfg)


def device() -> str:
  """The device that timings run on, in words."""
  d = jax.devices()[0]
  cores = f", {os.cpu_count()} cores" if d.platform == "cpu" else ""
  return f"{d.platform}: {d.device_kind} x{jax.device_count()}{cores}"


def time_run_step(cfg: ml_collections.ConfigDict, grid: list[dict]) -> float:
  """Seconds per run-step of a TIMED_STEPS chunk of the runs `grid` (compiled before timing)."""
  grid = runs.precompute_splits(cfg, grid)
  state = scaling_train.make_init(cfg)(*runs.run_inputs(cfg, grid))
  bits_T = scaling_train.task_bits(cfg)
  chunk = scaling_train.make_chunk(cfg, TIMED_STEPS).lower(state, bits_T).compile()
  best, spent = math.inf, 0.0
  with warnings.catch_warnings():  # a CPU cannot donate buffers; the timing is unaffected
    warnings.filterwarnings("ignore", "Some donated buffers were not usable")
    for _ in range(MAX_REPEATS):
      start = time.perf_counter()
      state, metrics, _ = chunk(state, bits_T)
      jax.block_until_ready(metrics)
      took = time.perf_counter() - start
      best, spent = min(best, took), spent + took
      if spent >= MIN_TIMED_S:
        break
  return best / (TIMED_STEPS * len(grid))


def fit_run_step(points: list[tuple[int, float]], params: int) -> float:
  """Seconds per run-step at `params` from timed (params, seconds) points: interpolated between
  them; below them the smallest one's time (a step's fixed part); above them a least-squares
  line through them (slope >= 0; proportional to the parameter count from a single point)."""
  xs, ys = (np.asarray(v, float) for v in zip(*sorted(points), strict=True))
  if params <= xs[-1]:
    return float(np.interp(params, xs, ys))
  if len(set(xs)) == 1:
    return float(ys.mean() * params / xs[-1])
  slope, intercept = np.polyfit(xs, ys, 1)
  return float(max(ys[-1], intercept + max(slope, 0.0) * params))


def inside(points: list[tuple[int, float]], params: int) -> bool:
  return min(p for p, _ in points) <= params <= max(p for p, _ in points)


def measure(shapes: dict, max_runs: int | None, budget_s: float, echo) -> dict:
  """{shape key: (seconds per run-step, source)}: the cheapest shape (params x timed runs) of
  each family is timed, even past `budget_s`; then, while the budget
  lasts, the largest shape whose predicted time fits in what is left, so that the others are
  interpolated between timed shapes rather than extrapolated."""
  cap = max_runs or (CPU_MAX_RUNS if jax.devices()[0].platform == "cpu" else None)
  timed_runs = {k: min(len(s["grid"]), cap or len(s["grid"])) for k, s in shapes.items()}
  order = sorted(shapes, key=lambda k: shapes[k]["params"] * timed_runs[k])
  points, done, start = {}, {}, time.monotonic()
  overhead = [math.inf]  # the least time a timing spent besides one chunk (init, compiling)

  def chunk_key(key):
    return shapes[key]["base_key"], timed_runs[key]

  def predicted(key) -> float:
    fam, n = shapes[key]["family"], timed_runs[key]
    return overhead[0] + TIMED_STEPS * n * fit_run_step(points[fam], shapes[key]["params"])

  def time_one(key) -> None:
    shape, n = shapes[key], timed_runs[key]
    t0 = time.monotonic()
    seconds = time_run_step(shape["cfg"], shape["grid"][:n])
    overhead[0] = min(overhead[0], time.monotonic() - t0 - TIMED_STEPS * n * seconds)
    points.setdefault(shape["family"], []).append((shape["params"], seconds))
    done[chunk_key(key)] = seconds
    echo(f"  timed {len(done)} of {len({chunk_key(k) for k in shapes})} {shape['name']}: {n} of "
         f"{len(shape['grid'])} run(s), {1 / seconds:.3g} run-steps/s "
         f"({time.monotonic() - t0:.0f} s with compiling)")

  for key in order:
    if shapes[key]["family"] not in points:
      time_one(key)
  while True:
    left = budget_s - (time.monotonic() - start)
    fits = [k for k in order if chunk_key(k) not in done and predicted(k) <= left]
    if not fits:
      break
    time_one(fits[-1])
  out = {}
  for key in order:
    R, n = len(shapes[key]["grid"]), timed_runs[key]
    if chunk_key(key) in done:  # timed itself, or the same chunk for another run count
      out[key] = (done[chunk_key(key)], "timed" if n == R else f"timed {n}/{R}")
    else:
      fam, params = shapes[key]["family"], shapes[key]["params"]
      out[key] = (fit_run_step(points[fam], params),
                  "fit" if inside(points[fam], params) else "extrapolated")
  return out


def read_rates(path: str) -> tuple[dict, str]:
  """({program: steps/s}, device) from a --rates file (as --save_rates writes it)."""
  try:
    with open(path) as f:
      data = json.load(f)
    return {k: float(v) for k, v in data["steps_per_s"].items()}, str(data.get("device", "?"))
  except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
    raise ConfigError("rates", f"{path}: {type(e).__name__}: {e}; expected JSON "
                      f'{{"device": "...", "steps_per_s": {{"<program>": <steps/s>}}}}') from None


def estimate_rows(spec: str, sweep_dir: str, rates: str | None = None,
                  max_runs: int | None = None, budget_s: float = BUDGET_S,
                  echo=print) -> tuple[list[Row], str]:
  """The table's rows and the device their rates come from (timed here unless `rates`)."""
  programs = program_configs(spec, sweep_dir)
  shapes, key_of, params = {}, {}, {}
  for name, cfg in programs:
    base_key = shape_key(cfg)
    if base_key not in params:
      params[base_key] = param_count(cfg)
    grid = runs.run_grid(cfg)
    key_of[name] = key = f"{base_key}|{len(grid)}"
    shapes.setdefault(key, {"name": name, "cfg": cfg, "grid": grid, "params": params[base_key],
                            "family": family(cfg), "base_key": base_key})
  if rates:
    per_program, where = read_rates(rates)
  else:
    where = device()
    echo(f"timing {len(shapes)} distinct program shape(s) of {len(programs)} on {where} "
         f"({TIMED_STEPS}-step chunks, budget {budget_s:.0f} s)")
    timed = measure(shapes, max_runs, budget_s, echo)
  rows = []
  for name, cfg in programs:
    key, R = key_of[name], len(shapes[key_of[name]]["grid"])
    if rates:
      rate, source = per_program.get(name), "file" if name in per_program else "-"
    elif key in timed:
      rate, source = 1 / (timed[key][0] * R), timed[key][1]
    else:
      rate, source = None, "-"
    rows.append(Row(name, R, cfg.train.num_steps, shapes[key]["params"], rate, source))
  return rows, where


def hours(row: Row) -> float:
  return row.steps / row.steps_per_s / 3600 if row.steps_per_s else math.nan


def table(rows: list[Row], where: str) -> str:
  """Per program and in total: runs, steps, parameters, run-steps, steps/s and hours."""
  lines = [report.table(
      ["program", "runs", "steps", "params", "run-steps", "steps/s", "hours", "rate"],
      [[r.name, r.runs, r.steps, r.params, r.runs * r.steps,
        math.nan if r.steps_per_s is None else r.steps_per_s, hours(r), r.source]
       for r in rows])]
  known = [r for r in rows if r.steps_per_s]
  total = sum(hours(r) for r in known)
  lines.append(f"total: {len(rows)} programs, {sum(r.runs for r in rows)} runs, "
               f"{sum(r.runs * r.steps for r in rows):,} run-steps, {total:.4g} hours"
               + (f" ({len(rows) - len(known)} program(s) not measured, not counted)"
                  if len(known) < len(rows) else "")
               + f"; rates from {where}, one program at a time")
  kinds = {"timed k/R" if r.source.startswith("timed ") else r.source for r in rows}
  lines += [f"  rate {k}: {v}" for k, v in SOURCES.items() if k in kinds]
  return "\n".join(lines)


def save_rates(path: str, rows: list[Row], where: str) -> None:
  """Writes the rates as a --rates file."""
  with open(path, "w") as f:
    json.dump({"device": where, "timed_steps": TIMED_STEPS,
               "steps_per_s": {r.name: r.steps_per_s for r in rows if r.steps_per_s},
               "source": {r.name: r.source for r in rows if r.steps_per_s}}, f, indent=2)


def run_estimate(spec: str, sweep_dir: str, rates: str | None = None,
                 max_runs: int | None = None, budget_s: float = BUDGET_S,
                 save: str | None = None, echo=print) -> list[Row]:
  """Prints the estimate table of the sweep `spec` (writing nothing in `sweep_dir`); `save`
  writes its rates as a --rates file."""
  rows, where = estimate_rows(spec, sweep_dir, rates, max_runs, budget_s, echo)
  echo(f"# estimate of sweep {spec}")
  echo(table(rows, where))
  if save:
    save_rates(save, rows, where)
  return rows
