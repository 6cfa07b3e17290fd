"""The training loop: vmapped seed == solo run, resume == uninterrupted, learning, clear errors."""

import json
import math
import os

import chex
import jax
import numpy as np
import pytest

from compgen_jax import checkpointing, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.scaling import runs
from compgen_jax.scaling import state as run_state
from compgen_jax.scaling import train as scaling_train
from compgen_jax.scaling.state import init_run
from compgen_jax.students import registry as students
from compgen_jax.training import chunk as chunk_lib
from compgen_jax.types import ConfigError, NonFiniteError
from tests.helpers import load_config


@pytest.fixture(scope="module")
def tiny_cfg():
  return load_config("hyperteacher", "tiny")


@pytest.fixture(scope="module")
def finished(tiny_cfg, tmp_path_factory):
  """An uninterrupted tiny run: (workdir, final rows)."""
  workdir = str(tmp_path_factory.mktemp("uninterrupted"))
  return workdir, scaling_train.train_and_evaluate(tiny_cfg, workdir)


def test_tiny_preset_learns(finished, tiny_cfg):
  workdir, rows = finished
  assert len(rows) == tiny_cfg.num_seeds
  assert np.mean([r["id/r2"] for r in rows]) > 0.5
  assert np.mean([r["ood/r2"] for r in rows]) > 0.3
  history = metric_writer.read_rows(os.path.join(workdir, workdir_lib.METRICS_FILE))
  every = tiny_cfg.train.log_every
  assert len(history) == tiny_cfg.train.num_steps // every * tiny_cfg.num_seeds
  assert [r["step"] for r in history[::tiny_cfg.num_seeds]] == list(
      range(every, tiny_cfg.train.num_steps + 1, every))
  # Every row carries the run's numbers of training and held-out tasks (paper: T - floor(T f)).
  T = math.comb(6, 1) + math.comb(6, 2)
  assert {(r["n_train"], r["n_ood"]) for r in history} == {
      (T - math.floor(T * tiny_cfg.task.frac_ood), math.floor(T * tiny_cfg.task.frac_ood))}
  first = np.mean([r["train/loss"] for r in history[:4]])
  last = np.mean([r["train/loss"] for r in history[-4:]])
  assert last < 0.5 * first
  assert os.path.exists(os.path.join(workdir, "config.json"))
  assert checkpointing.available_steps(os.path.join(workdir, workdir_lib.CHECKPOINT_DIR))[-1] == 200
  # params.json: one run's student, counted from init_params' shapes (not the run-stacked state).
  enc_dim, x_dim, out_dim, _ = run_state.dims(tiny_cfg)
  shapes = jax.eval_shape(lambda key: students.init_params(
      tiny_cfg.student, key, enc_dim, x_dim, out_dim, run_state.vocab_size(tiny_cfg)),
      jax.random.key(0))
  with open(os.path.join(workdir, "params.json")) as f:
    assert json.load(f) == {"student": sum(math.prod(a.shape) for a in jax.tree.leaves(shapes))}


@pytest.mark.parametrize("strategy", ["vmap", "map"])
def test_vmapped_run_equals_solo_run(tiny_cfg, strategy):
  grid = runs.run_grid(tiny_cfg)
  keys, hparams = runs.run_inputs(tiny_cfg, grid)
  stacked = scaling_train.make_init(tiny_cfg)(keys, hparams)
  one = lambda tree: jax.tree.map(lambda a: a[1], tree)  # noqa: E731 - run 1 alone
  solo = jax.jit(lambda k, h, sp: init_run(k, h, tiny_cfg, sp))(
      keys[1], one(hparams), one(runs.host_splits(tiny_cfg, keys, hparams)))
  chex.assert_trees_all_close(jax.tree.map(lambda a: a[1], stacked), solo)
  bits = scaling_train.task_bits(tiny_cfg)
  chunk = scaling_train.make_chunk(tiny_cfg, 20, strategy)
  stacked, metrics, ok = chunk(stacked, bits)
  solo_chunk = jax.jit(lambda s, b: chunk_lib.scan_one_run(
      s, b, step=scaling_train.step_one(tiny_cfg), length=20))
  solo, solo_metrics, solo_ok = solo_chunk(solo, bits)
  assert metrics["train/loss"].shape == (len(grid), 20) and ok.shape == (len(grid),)
  if strategy == "map":  # each run is the one-run program: the same bits
    chex.assert_trees_all_equal(jax.tree.map(lambda a: a[1], stacked), solo)
    chex.assert_trees_all_equal(jax.tree.map(lambda a: a[1], metrics), solo_metrics)
  chex.assert_trees_all_close(jax.tree.map(lambda a: a[1], stacked.params), solo.params,
                              rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(metrics["train/loss"][1], solo_metrics["train/loss"], rtol=1e-5)
  assert bool(ok[1]) and bool(solo_ok)


def test_on_one_cpu_the_chunk_runs_the_one_run_programs_matmuls():
  """XLA:CPU's batched dot is slower per FLOP than one run's plain dots (throughput.py): on one
  CPU "auto" compiles every run's dots exactly as the one-run program has them once a run's
  largest weight has MAP_MIN_WEIGHTS entries (width 128); below, and with "vmap", they are
  batched over the runs."""
  assert jax.default_backend() == "cpu" and jax.device_count() == 1

  def dots(fn, arg, bits):  # each dot_general's dimensions and operand types, no SSA names
    hlo = fn.lower(arg, bits).as_text()
    return sorted(line.split("dot_general", 1)[1].split(",", 2)[2] for line in hlo.splitlines()
                  if "stablehlo.dot_general" in line)

  for width, mapped in ((128, True), (64, False)):
    cfg = load_config("hyperteacher", "tiny", **{"student.mlp.width": width})
    state = scaling_train.abstract_state(cfg, runs.run_grid(cfg))
    assert chunk_lib.runs_one_after_another(state.params) == mapped
    one = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype), state)
    bits = scaling_train.task_bits(cfg)
    solo = dots(jax.jit(lambda s, b, cfg=cfg: chunk_lib.scan_one_run(
        s, b, step=scaling_train.step_one(cfg), length=5)), one, bits)
    vmapped = dots(scaling_train.make_chunk(cfg, 5, "vmap"), state, bits)
    assert solo and vmapped != solo
    assert dots(scaling_train.make_chunk(cfg, 5), state, bits) == (solo if mapped else vmapped)
  with pytest.raises(ValueError, match="unknown strategy"):
    scaling_train.make_chunk(cfg, 5, "loop")


def test_resume_after_stop_and_nonfinite_equals_uninterrupted(finished, tiny_cfg, tmp_path,
                                                              monkeypatch):
  reference_dir, reference_rows = finished
  workdir = str(tmp_path / "resumed")
  ckpt_dir = os.path.join(workdir, workdir_lib.CHECKPOINT_DIR)
  scaling_train.train_and_evaluate(tiny_cfg, workdir, stop_after=100)
  assert checkpointing.available_steps(ckpt_dir) == [100]

  # A chunk that goes non-finite: clear error, the good checkpoint survives.
  monkeypatch.setattr(chunk_lib, "all_finite", lambda tree: jax.numpy.asarray(False))
  chunk_lib.make_chunk.cache_clear()
  with pytest.raises(NonFiniteError, match="step 150"):
    scaling_train.train_and_evaluate(tiny_cfg, workdir)
  assert checkpointing.available_steps(ckpt_dir) == [100]
  monkeypatch.undo()
  chunk_lib.make_chunk.cache_clear()

  rows = scaling_train.train_and_evaluate(tiny_cfg, workdir)
  assert rows == reference_rows
  assert (metric_writer.read_rows(os.path.join(workdir, workdir_lib.METRICS_FILE))
          == metric_writer.read_rows(os.path.join(reference_dir, workdir_lib.METRICS_FILE)))


def test_workdir_with_other_config_is_refused(finished, tiny_cfg):
  workdir, _ = finished
  before = metric_writer.read_rows(os.path.join(workdir, workdir_lib.METRICS_FILE))
  other = load_config("hyperteacher", "tiny", **{"optim.learning_rate": 1e-2})
  with pytest.raises(ConfigError, match="different config"):
    scaling_train.train_and_evaluate(other, workdir)
  assert metric_writer.read_rows(os.path.join(workdir, workdir_lib.METRICS_FILE)) == before


def test_sweep_axes_multiply_seeds(tiny_cfg):
  cfg = load_config("hyperteacher", "tiny", **{"sweep.frac_ood": (0.2, 0.5),
                                               "sweep.learning_rate": (1e-3, 3e-3, 1e-2)})
  grid = runs.run_grid(cfg)
  assert len(grid) == 2 * 2 * 3
  assert {r["frac_ood"] for r in grid} == {0.2, 0.5}
  runs.precompute_splits(cfg, grid)
  keys, hparams = runs.run_inputs(cfg, grid)
  state = scaling_train.make_init(cfg)(keys, hparams)
  n_ood = np.asarray(state.task["split"].n_ood)
  assert sorted(set(n_ood.tolist())) == [int(21 * 0.2), int(21 * 0.5)]
  np.testing.assert_allclose(state.opt_state.hyperparams["learning_rate"],
                             hparams["learning_rate"])


BAD = [
    ({"task.max_hotness": 7}, "task.max_hotness"),
    ({"task.support": "bogus"}, "task.support"),
    ({"task.support": "connected", "task.max_hotness": 3}, "task.max_hotness"),
    ({"task.frac_ood": 1.0}, "task.frac_ood"),
    ({"task.frac_ood": 0.97}, "task.frac_ood"),
    ({"task.weights": "binary"}, "task.weights"),
    ({"task.family": "chess"}, "task.family"),
    ({"encoding.name": "morse"}, "encoding.name"),
    ({"student.name": "lstm"}, "student.name"),
    ({"student.mlp.width": 0}, "student.mlp.width"),
    ({"optim.schedule": "step"}, "optim.schedule"),
    ({"optim.learning_rate": -1.0}, "optim.learning_rate"),
    ({"evals.id.every": 70}, "evals.id.every"),
    ({"train.batch_size": 0}, "train.batch_size"),
    ({"optim.schedule": "warmup_cosine", "optim.warmup_steps": 500}, "optim.warmup_steps"),
    ({"evals.ood.num_tasks": 0}, "evals.ood.num_tasks"),
    ({"num_seeds": 0}, "num_seeds"),
    ({"optim.end_factor": -0.5}, "optim.end_factor"),
    ({"optim.b1": 1.0}, "optim.b1"),
    ({"optim.b2": -0.1}, "optim.b2"),
    ({"task.family": "preference"}, "task.family"),
    ({"task.frac_ood": 0.01}, "task.frac_ood"),  # 21 tasks: rounds down to 0 held out
    ({"train.log_every": 7}, "train.log_every"),  # must divide chunk_size 50
]


@pytest.mark.parametrize("overrides,field", BAD)
def test_bad_config_raises_before_anything_is_written(overrides, field, tmp_path):
  cfg = load_config("hyperteacher", "tiny", **overrides)
  workdir = str(tmp_path / "never")
  with pytest.raises(ConfigError, match=field):
    scaling_train.train_and_evaluate(cfg, workdir)
  assert not os.path.exists(workdir)


def test_evaluator_the_family_cannot_use_is_refused_before_config_json(tmp_path):
  """Rejected before the workdir exists, so the corrected command is not refused later as
  'a different config'."""
  cfg = load_config("preference", "tiny")
  with cfg.unlocked():
    cfg.evals.ood_hotness = {}
  workdir = str(tmp_path / "never")
  with pytest.raises(ConfigError, match="evals.ood_hotness"):
    scaling_train.train_and_evaluate(cfg, workdir)
  assert not os.path.exists(workdir)


def test_run_in_a_sweep_grid_equals_the_solo_run_with_its_key_and_values():
  """Same key and hyperparameters: the task (teacher, split, encoding) and the initial student
  are bit-identical; after training, equal to float32 rounding where the runs are vmapped and
  bit-identical where they run one after another (one CPU; docs/training.md states what holds)."""
  grid_cfg = load_config("hyperteacher", "tiny", **{"sweep.learning_rate": (1e-3, 3e-3),
                                                    "sweep.frac_ood": (0.2, 0.5),
                                                    "student.mlp.width": 128})
  solo_cfg = load_config("hyperteacher", "tiny", **{"num_seeds": 1, "optim.learning_rate": 3e-3,
                                                    "task.frac_ood": 0.5, "student.mlp.width": 128})
  states = []
  for cfg in (grid_cfg, solo_cfg):
    grid = runs.precompute_splits(cfg, runs.run_grid(cfg))
    state = scaling_train.make_init(cfg)(*runs.run_inputs(cfg, grid))
    i = next(r["run"] for r in grid if r["seed"] == 0 and r["learning_rate"] == 3e-3
             and r["frac_ood"] == 0.5)
    initial = jax.tree.map(lambda a, i=i: np.asarray(a[i]), (state.task, state.params))
    state, _, _ = scaling_train.make_chunk(cfg, 50)(state, scaling_train.task_bits(cfg))
    states.append((initial, jax.tree.map(lambda a, i=i: np.asarray(a[i]), state.params)))
  (grid_init, grid_params), (solo_init, solo_params) = states
  for a, b in zip(jax.tree.leaves(grid_init), jax.tree.leaves(solo_init), strict=True):
    np.testing.assert_array_equal(a, b)
  chex.assert_trees_all_close(grid_params, solo_params, rtol=1e-5, atol=1e-6)
  if chunk_lib.runs_one_after_another(jax.tree.map(lambda a: a[None], grid_params)):  # [1, ...]
    chex.assert_trees_all_equal(grid_params, solo_params)


def test_log_every_rows_are_window_aggregates_of_the_per_step_rows(tmp_path):
  """One row per log_every steps: the mean loss / R^2, the last learning rate and the largest
  gradient norm of the per-step rows of the same run; evaluation rows unchanged."""
  per_step = load_config("hyperteacher", "tiny", **{"train.log_every": 1, "num_seeds": 1})
  windowed = load_config("hyperteacher", "tiny", **{"train.log_every": 25, "num_seeds": 1})
  fine = scaling_train.train_and_evaluate(per_step, str(tmp_path / "fine"))
  coarse = scaling_train.train_and_evaluate(windowed, str(tmp_path / "coarse"))
  rows = {}
  for name in ("fine", "coarse"):
    rows[name] = metric_writer.read_rows(str(tmp_path / name / workdir_lib.METRICS_FILE))
  assert len(rows["coarse"]) == len(rows["fine"]) // 25
  for i, row in enumerate(rows["coarse"]):
    window = rows["fine"][25 * i: 25 * (i + 1)]
    assert row["step"] == window[-1]["step"] == 25 * (i + 1)
    np.testing.assert_allclose(row["train/loss"], np.mean([r["train/loss"] for r in window]),
                               rtol=1e-5)
    assert row["train/lr"] == window[-1]["train/lr"]
    assert row["train/grad_norm"] == max(r["train/grad_norm"] for r in window)
  assert coarse[0]["ood/r2"] == fine[0]["ood/r2"]
