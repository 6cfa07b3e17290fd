"""The Theorem 3.1 experiment: error vs N, neuron count vs M at fixed eps, and SGD at equal size.

Writes theorem.jsonl (one row per measurement, `kind` says which table), config.json, the SGD runs
under <workdir>/sgd (the normal training loop and its workdir format), and from the rows alone
(theory/report.py) report.md, claims.json and the two plots.
"""

import copy
import functools
import os
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from compgen_jax import checks, metric_writer, rng
from compgen_jax import workdir as workdir_lib
from compgen_jax.scaling import runs
from compgen_jax.scaling import train as scaling_train
from compgen_jax.tasks import combinatorics, hyperteacher
from compgen_jax.theory import construction, measure, report
from compgen_jax.types import ConfigError

TABLE_FILE = report.TABLE_FILE
SGD_DIR = "sgd"
MAX_GRID_POINTS = 1 << 16  # grid_points ** I beyond this is a typo, not a plan


def validate(cfg: ml_collections.ConfigDict) -> None:
  """Every check that needs no compilation; raises ConfigError naming the field."""
  task, th = cfg.hyperteacher.task, cfg.theorem
  try:
    hyperteacher.validate(task)
  except ConfigError as e:
    raise ConfigError(f"hyperteacher.{e.field}", str(e).split(": ", 1)[1]) from e
  if task.num_hidden_layers != 1:
    raise ConfigError("hyperteacher.task.num_hidden_layers", "the explicit construction "
                      "covers one teacher hidden layer (the paper's setting), got "
                      f"{task.num_hidden_layers}")
  checks.integers("theorem.resolutions", th.resolutions, 1)
  if len(set(th.resolutions)) < 2:
    raise ConfigError("theorem.resolutions", "needs two distinct N to fit a slope")
  for name in ("num_teachers", "max_tasks", "weight_draws", "max_elements", "count_max_tasks",
               "sgd_resolution"):
    checks.integer(f"theorem.{name}", th[name], 1)
  checks.integer("theorem.grid_points", th.grid_points, 0)
  checks.integer("theorem.num_inputs", th.num_inputs, 0)
  if th.grid_points == 1 or (th.grid_points == 0 and th.num_inputs == 0):
    raise ConfigError("theorem.grid_points", "use 0 (no grid) or >= 2 points, and some inputs")
  if th.grid_points ** task.input_dim > MAX_GRID_POINTS:
    raise ConfigError("theorem.grid_points", f"{th.grid_points}^{task.input_dim} grid inputs "
                      f"exceed {MAX_GRID_POINTS}; use fewer points and more num_inputs")
  checks.positive("theorem.eps", th.eps)
  checks.integers("theorem.num_modules", th.num_modules, task.max_hotness,
                  combinatorics.MAX_MODULES)
  if th.sgd:
    sgd = cfg.hyperteacher
    if sgd.encoding.name != "identity" or sgd.student.name != "mlp":
      raise ConfigError("hyperteacher.encoding.name", "the constructed network reads z itself: "
                        "the SGD comparison needs encoding 'identity' and student 'mlp', got "
                        f"{sgd.encoding.name!r} / {sgd.student.name!r}")
    if sgd.optim.schedule == "warmup_cosine" and sgd.optim.warmup_steps >= sgd.train.num_steps:
      raise ConfigError("hyperteacher.optim.warmup_steps", f"must be < train.num_steps "
                        f"({sgd.train.num_steps}) for warmup_cosine, got {sgd.optim.warmup_steps}")
    try:
      runs.validate(training_config(cfg))
    except ConfigError as e:
      raise ConfigError(f"hyperteacher.{e.field}", str(e).split(": ", 1)[1]) from e


def training_config(cfg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """cfg.hyperteacher with the student widths of the network constructed at sgd_resolution."""
  train_cfg = copy.deepcopy(cfg.hyperteacher)
  task = train_cfg.task
  widths = construction.hidden_widths(task.input_dim, task.hidden_dim, cfg.theorem.sgd_resolution)
  train_cfg.student.mlp.update(width=widths[0], depth=len(widths), widths=widths)
  return train_cfg


def _domain(key, task, th, max_tasks: int, modules: int = 0):
  """(latents [B, M'], inputs [P, I]); modules > 0 pads rows and columns to one shape."""
  khot = measure.task_sample(rng.stream(key, "split"), task.num_modules, task.max_hotness,
                             max_tasks, rows=max_tasks if modules else 0, modules=modules)
  z = measure.weighted_latents(rng.stream(key, "data"), jnp.asarray(khot), task.weights,
                               th.weight_draws)
  x = measure.input_points(rng.stream(key, "test"), task.input_dim, th.grid_points, th.num_inputs)
  return z, x


def error_sweep(cfg: ml_collections.ConfigDict) -> list[dict]:
  """Sup error, both bounds and the neuron count for each teacher and N."""
  task, th, K = cfg.hyperteacher.task, cfg.theorem, cfg.hyperteacher.task.max_hotness
  key = rng.stream(jax.random.key(cfg.seed), "theorem_error")
  rows = []
  for t in range(th.num_teachers):
    key_t = jax.random.fold_in(key, t)
    teacher = hyperteacher.init(rng.stream(key_t, "teacher"), task)
    z, x = _domain(key_t, task, th, th.max_tasks)
    for n in sorted(th.resolutions):
      logging.info("error sweep: teacher %d, N = %d", t, n)
      rows.append(dict(
          kind="error", teacher=t, resolution=n, num_latents=z.shape[0], num_inputs=x.shape[0],
          sup_error=measure.sup_error(teacher, K, n, z, x, th.max_elements, th.float64),
          bound=float(construction.error_bound(teacher, K, n)),
          sharp_bound=float(construction.sharp_error_bound(teacher, K, n)),
          neurons=construction.neuron_count(task.num_modules, task.input_dim, task.hidden_dim,
                                            task.output_dim, n)))
  return rows


def _pad_modules(teacher: dict, M: int) -> dict:
  """Zero modules up to M: the same function on latents padded with zeros, and the same ranges
  and bounds (zero rows add nothing to the top-K sums), so all M share compiled shapes."""
  grow = lambda a: jnp.pad(a, [(0, M - a.shape[0])] + [(0, 0)] * (a.ndim - 1))
  return dict(teacher, theta=tuple(map(grow, teacher["theta"])),
              beta=tuple(map(grow, teacher["beta"])))


def count_sweep(cfg: ml_collections.ConfigDict) -> list[dict]:
  """Neurons at fixed eps for each M, N = the largest N any teacher of the range needs."""
  th, key = cfg.theorem, rng.stream(jax.random.key(cfg.seed), "theorem_count")
  tasks, teachers = [], []
  for M in th.num_modules:
    task = copy.deepcopy(cfg.hyperteacher.task)
    task.num_modules = M
    tasks.append(task)
    teacher = hyperteacher.init(rng.stream(jax.random.fold_in(key, M), "teacher"), task)
    teachers.append(_pad_modules(teacher, max(th.num_modules)))
  needed = [construction.required_resolution(p, t.max_hotness, th.eps)
            for p, t in zip(teachers, tasks, strict=True)]
  n = max(needed)
  rows = []
  for task, teacher, n_own in zip(tasks, teachers, needed, strict=True):
    M, I, H, O, K = (task.num_modules, task.input_dim, task.hidden_dim, task.output_dim,
                     task.max_hotness)
    logging.info("count sweep: M = %d, N = %d", M, n)
    z, x = _domain(jax.random.fold_in(key, M), task, th, th.count_max_tasks,
                   modules=max(th.num_modules))
    rows.append(dict(
        kind="count", num_modules=M, eps=th.eps, resolution=n, own_resolution=n_own,
        neurons=construction.neuron_count(M, I, H, O, n),
        hidden_neurons=sum(construction.hidden_widths(I, H, n)),
        num_tasks=combinatorics.num_tasks(M, K),
        memorising_neurons=combinatorics.num_tasks(M, K) * H,
        bound=float(construction.error_bound(teacher, K, n)),
        sup_error=measure.sup_error(teacher, K, n, z, x, th.max_elements, th.float64)))
  return rows


def sgd_comparison(cfg: ml_collections.ConfigDict, workdir: str) -> list[dict]:
  """Per seed: OOD / ID R^2 of SGD-trained students of the constructed widths and of the
  constructed network itself, on the same teachers, splits and evaluation draws."""
  train_cfg = training_config(cfg)
  final = scaling_train.train_and_evaluate(train_cfg, os.path.join(workdir, SGD_DIR))
  grid = runs.run_grid(train_cfg)
  keys, hparams = runs.run_inputs(train_cfg, grid)
  # The same init the loop ran: teacher, split and evaluation keys match the trained runs.
  state = scaling_train.make_init(train_cfg)(keys, hparams)
  build = functools.partial(construction.construct, max_hotness=train_cfg.task.max_hotness,
                            resolution=cfg.theorem.sgd_resolution)
  net = jax.vmap(build)(state.task["teacher"])
  # id and ood with training's evals settings: the same draws the SGD students were scored on.
  evaluate = scaling_train.make_evaluate(train_cfg, ("id", "ood"))
  ours = evaluate(state.replace(params=net), scaling_train.task_bits(train_cfg))
  ours = jax.tree.map(np.asarray, ours)
  rows = []
  for r, row in enumerate(sorted(final, key=lambda row: row["run"])):
    rows.append(dict(kind="sgd", run=row["run"], seed=row["seed"], frac_ood=row["frac_ood"],
                     resolution=cfg.theorem.sgd_resolution,
                     widths=list(train_cfg.student.mlp.widths), steps=train_cfg.train.num_steps,
                     **{f"sgd/{k}": row[k] for k in ("id/r2", "ood/r2")},
                     **{f"constructed/{k}": float(ours[k][r]) for k in ("id/r2", "ood/r2")}))
  return rows


def loglog_slope(n, err) -> float:
  """Least-squares slope of log err against log N."""
  return float(np.polyfit(np.log(np.asarray(n, float)), np.log(np.asarray(err, float)), 1)[0])


def summarize(rows: list[dict]) -> dict:
  """Slope of the sup error per teacher (mean), mean ratio err(N)/err(2N), means of the SGD rows."""
  err = [r for r in rows if r["kind"] == "error"]
  out = {"kind": "summary"}
  by_teacher = {}
  for r in err:
    by_teacher.setdefault(r["teacher"], []).append(r)
  slopes, ratios = [], []
  for rs in by_teacher.values():
    slopes.append(loglog_slope([r["resolution"] for r in rs], [r["sup_error"] for r in rs]))
    e = {r["resolution"]: r["sup_error"] for r in rs}
    ratios += [e[n] / e[2 * n] for n in e if 2 * n in e]
  out["error_slope"] = float(np.mean(slopes))
  out["doubling_ratio"] = float(np.mean(ratios)) if ratios else float("nan")
  out["bound_holds"] = all(r["sup_error"] <= r["sharp_bound"] <= r["bound"] for r in err)
  count = [r for r in rows if r["kind"] == "count"]
  if count:
    out["neurons_per_module"] = float(np.polyfit(
        [r["num_modules"] for r in count], [r["neurons"] for r in count], 1)[0])
    out["count_within_eps"] = all(r["sup_error"] <= r["eps"] for r in count)
  sgd = [r for r in rows if r["kind"] == "sgd"]
  for k in ("sgd/ood/r2", "constructed/ood/r2", "sgd/id/r2", "constructed/id/r2"):
    if sgd:
      out[k] = float(np.mean([r[k] for r in sgd]))
  return out


def run(cfg: ml_collections.ConfigDict, workdir: str) -> dict:
  """The whole experiment in `workdir`; returns the summary row (also the table's last row)."""
  validate(cfg)
  workdir_lib.prepare(workdir, cfg)
  start = time.time()
  rows = error_sweep(cfg) + count_sweep(cfg)
  if cfg.theorem.sgd:
    rows += sgd_comparison(cfg, workdir)
  summary = summarize(rows) | {"wall_s": time.time() - start}
  path = os.path.join(workdir, TABLE_FILE)
  if os.path.exists(path):
    os.remove(path)  # a rerun rewrites the table rather than appending duplicates
  metric_writer.append_rows(path, rows + [summary])
  report.write_report(workdir)  # report.md, claims.json and the two plots, from the rows
  return summary
