"""Collecting workdirs into a table and correlating decodability with OOD R^2 (files only)."""

import json
import math
import os

import numpy as np
import pytest

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import correlation, load, plots
from compgen_jax.types import ConfigError
from tests.helpers import load_config

RUN = {"seed": 0, "frac_ood": 0.25, "learning_rate": 0.003, "weight_decay": 0.003}


def _fake_workdir(path: str, encoding: str, decod: list[float], ood: list[float],
                  eval_ood: list[float] | None = None) -> str:
  workdir_lib.prepare(path, load_config("hyperteacher", "tiny", **{"encoding.name": encoding}))
  metric_writer.append_rows(os.path.join(path, workdir_lib.METRICS_FILE), [
      {"step": s, "run": r, **RUN, "ood/r2": o - (100 - s) / 100, "id/r2": 0.9}
      for s in (50, 100) for r, o in enumerate(ood)])
  metric_writer.append_rows(os.path.join(path, workdir_lib.PROBE_FILE), [
      {"step": 100, "run": r, **RUN, "lambda": lam, "z/input/ood_r2": 1.0,
       "z/dense_0/ood_r2": d - 0.1, "z/dense_1/ood_r2": d, "z/best_layer": "dense_1",
       "z/best/ood_r2": d if lam == 1.0 else 0.0, "z/best/id_r2": d}
      for r, d in enumerate(decod) for lam in (1.0, 10.0)])
  if eval_ood is not None:
    metric_writer.append_rows(os.path.join(path, workdir_lib.EVAL_FILE), [
        {"step": 100, "run": r, **RUN, "ood/r2": o} for r, o in enumerate(eval_ood)])
  return path


@pytest.fixture
def workdirs(tmp_path):
  return [
      _fake_workdir(str(tmp_path / "a"), "identity", [0.9, 0.5], [0.95, 0.4]),
      _fake_workdir(str(tmp_path / "b"), "orthogonal", [0.7, 0.2], [0.0, 0.0],
                    eval_ood=[0.8, float("nan")]),
  ]


def test_collect_reads_one_row_per_run_at_the_probed_step(workdirs):
  rows = load.collect(workdirs)
  assert [(os.path.basename(r["workdir"]), r["run"]) for r in rows] == [
      ("a", 0), ("a", 1), ("b", 0), ("b", 1)]
  assert all(r["step"] == 100 and r["lambda"] == 1.0 for r in rows)
  assert [r["encoding.name"] for r in rows] == ["identity"] * 2 + ["orthogonal"] * 2
  assert rows[0]["student.mlp.width"] == 64 and rows[0]["task.num_modules"] == 6
  # eval.jsonl (standalone) wins over the in-training row of the same step; "nan" reads back.
  assert [r["ood/r2"] for r in rows[:3]] == [0.95, 0.4, 0.8] and math.isnan(rows[3]["ood/r2"])
  assert rows[0]["z/dense_0/ood_r2"] == pytest.approx(0.8)
  assert load.collect(workdirs[:1], lam=10.0)[0]["z/best/ood_r2"] == 0.0


def test_correlation_matches_numpy_and_skips_nan(workdirs):
  corr = correlation.decodability_vs_generalization(load.collect(workdirs))
  r = np.corrcoef([0.9, 0.5, 0.7], [0.95, 0.4, 0.8])[0, 1]
  assert corr["n"] == 3
  assert corr["r"] == pytest.approx(r) and corr["r2"] == pytest.approx(r * r)
  assert all(math.isnan(v) for v in correlation.pearson([1.0, 2.0], [1.0, 3.0]))
  assert all(math.isnan(v) for v in correlation.pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))


def test_report_writes_table_and_scatter(workdirs, tmp_path):
  text = correlation.write_report(workdirs, str(tmp_path / "out"))
  assert "Pearson r" in text and "dense_1" in text
  # 3 finite pairs: n - 3 = 0 leaves no Fisher-z interval
  assert "(no interval: fewer than 4 runs)" in text
  assert (tmp_path / "out" / correlation.SCATTER_FILE).stat().st_size > 0
  assert len(metric_writer.read_rows(str(tmp_path / "out" / correlation.TABLE_FILE))) == 4
  correlation.write_report(workdirs, str(tmp_path / "out"))  # rewritten, not appended
  assert len(metric_writer.read_rows(str(tmp_path / "out" / correlation.TABLE_FILE))) == 4


def test_curve_png(tmp_path):
  rows = [{"step": s, "run": r, "ood/r2": s / 100 - r} for s in (1, 2, 3) for r in (0, 1)]
  assert os.path.getsize(plots.curve_png(rows, str(tmp_path / "c.png"))) > 0


def test_bad_inputs_are_clear_errors(workdirs, tmp_path):
  with pytest.raises(ConfigError, match="does not exist"):
    load.collect([str(tmp_path / "missing")])
  os.makedirs(tmp_path / "foreign")
  with pytest.raises(ConfigError, match="no config.json"):
    load.collect([str(tmp_path / "foreign")])
  with pytest.raises(ConfigError, match="lambda=3.0"):
    load.collect(workdirs, lam=3.0)


def test_late_rise_is_the_training_metric_over_the_last_quarter_and_reaches_the_fit_line(
    tmp_path):
  from compgen_jax.analysis import aggregate
  from compgen_jax.analysis import markdown as md
  path = _fake_workdir(str(tmp_path / "a"), "identity", [0.9, 0.5], [0.95, 0.4])
  # run r: train/r2 = (1 + r) * step / 1000 at steps 100..1000; train/loss logged once only.
  metric_writer.append_rows(os.path.join(path, workdir_lib.METRICS_FILE), [
      {"step": s, "run": r, **RUN, "train/r2": (1 + r) * s / 1000}
      for s in range(100, 1001, 100) for r in (0, 1)] + [
      {"step": 1000, "run": 0, **RUN, "train/loss": 0.1}])
  rows = load.collect([path])
  # last logged step 1000, the last at or before 750 is 700: (1 + r) * 0.3.
  assert [r["late_rise/r2"] for r in rows] == pytest.approx([0.3, 0.6])
  assert not any("late_rise/loss" in r for r in rows)
  metric = aggregate.Metric("ood/r2", "OOD R^2", "ood_r2", "id/r2")
  line = md.fits_check(rows, metric, 0.9)
  sd = np.std([0.3, 0.6], ddof=1)
  assert "2 of 2 runs" in line and f"+0.450 ± {sd:.3f} over 2 runs" in line


def test_rows_carry_every_config_field_and_metric_no_list_names(tmp_path):
  """A field of a new student and a new evaluator's metric (named in no list of the loader)
  reach the loaded rows, as do the probes of every target and the evaluations' losses."""
  path = _fake_workdir(str(tmp_path / "a"), "identity", [0.9, 0.5], [0.95, 0.4])
  config_path = os.path.join(path, workdir_lib.CONFIG_FILE)
  with open(config_path) as f:
    cfg = json.load(f)
  cfg["student"]["name"] = "kan"
  cfg["student"]["kan"] = {"grid_size": 7, "spline_order": 3}
  cfg["seed"] = 17
  with open(config_path, "w") as f:
    json.dump(cfg, f)
  metric_writer.append_rows(os.path.join(path, workdir_lib.EVAL_FILE), [
      {"step": 100, "run": r, **RUN, "ood/calibration": 0.1 * (r + 1), "ood/loss": "nan"}
      for r in (0, 1)])
  metric_writer.append_rows(os.path.join(path, workdir_lib.PROBE_FILE), [
      {"step": 100, "run": r, **RUN, "lambda": 1.0, "z/best/ood_r2": 0.5,
       "theta/best/ood_r2": 0.25} for r in (0, 1)])
  rows = load.collect([path])
  assert [r["student.kan.grid_size"] for r in rows] == [7, 7]
  assert [r["student.name"] for r in rows] == ["kan", "kan"]
  assert [r["ood/calibration"] for r in rows] == pytest.approx([0.1, 0.2])
  assert math.isnan(rows[0]["ood/loss"])
  # the in-training evaluation of the same step keeps what the standalone one does not carry
  assert [r["ood/r2"] for r in rows] == pytest.approx([0.95, 0.4])
  assert [r["theta/best/ood_r2"] for r in rows] == [0.25, 0.25]
  # a run's own seed (its index) names the row, not the config's base seed
  assert [r["seed"] for r in rows] == [0, 0] and "task.num_modules" in rows[0]


def test_text_table_shows_what_tells_the_runs_apart(workdirs):
  header = correlation.text_table(load.collect(workdirs)).splitlines()[0].split()
  # the two workdirs differ in their encoding only; width and depth are the same in both
  assert header[:4] == ["workdir", "run", "seed", "encoding.name"]
  assert "student.mlp.width" not in header and "frac_ood" not in header
  assert header[-4:] == ["z/input/ood_r2", "z/dense_0/ood_r2", "z/dense_1/ood_r2", "z/best/ood_r2"]


def test_final_table_columns_are_the_rows_own_fields(tmp_path):
  from compgen_jax.analysis import report
  rows = [{"step": 10, "run": r, "seed": 0, "coverage": c, "ood/success": c / 2,
           "train/loss": 1.0} for r, c in enumerate((0.25, 0.5))]
  header = report.final_table(rows, str(tmp_path)).splitlines()[0].split()
  # a family's own run field (the image runs' coverage) is shown without being listed anywhere
  assert header == ["run", "seed", "coverage", "ood/success", "train/loss"]


def test_eval_table_shows_every_evaluator_metric():
  from compgen_jax.analysis import report
  rows = [{"step": 10, "run": r, "seed": 0, "id/r2": 0.9, "id/loss": 0.1, "ood/r2": 0.5,
           "ood/loss": 0.4, "ood_h4/r2": 0.3, "ood/calibration": 0.2} for r in (0, 1)]
  header = report.eval_table(rows).splitlines()[0].split()
  # a new evaluator's metric is a column without a list naming it (the losses are not)
  assert header == ["step", "run", "id/r2", "ood/r2", "ood_h4/r2", "ood/calibration"]


def test_curve_labels_show_what_tells_the_runs_apart(tmp_path):
  from compgen_jax.analysis import curves
  row = lambda r, **run: {"step": 5, "run": r, "train/loss": 1.0, **run}  # noqa: E731
  # the named fields, as before; n_train, fixed by frac_ood, and weight_decay, shared, add nothing
  rows = [row(r, seed=0, frac_ood=f, learning_rate=0.01, weight_decay=0.003, n_train=n)
          for r, (f, n) in enumerate(((0.25, 69), (0.5, 46)))]
  assert curves.labels(rows) == {0: "seed 0, frac 0.25, lr 0.01", 1: "seed 0, frac 0.5, lr 0.01"}
  # a family's own run field (the image runs' coverage) that tells runs apart is labelled
  rows = [row(r, seed=0, coverage=c, encoding="conv") for r, c in enumerate((0.25, 0.5))]
  assert curves.labels(rows) == {0: "seed 0, coverage 0.25", 1: "seed 0, coverage 0.5"}
  metric_writer.append_rows(str(tmp_path / workdir_lib.METRICS_FILE), rows)
  assert os.path.getsize(curves.plot_curves(str(tmp_path))) > 0
