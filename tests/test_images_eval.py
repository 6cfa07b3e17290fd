"""Sampler, probes and evaluation: the sampler returns an oracle's x0 exactly, a probe recovers a
planted linear code, and the binary trains, evaluates, probes and reports (smoke test); evaluation
from the checkpoint reproduces the binary's rows; a bad config exits 2 with one line."""

import os
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.images import analysis, evaluate, probes, sampler, scenes
from compgen_jax.images import model as model_lib
from compgen_jax.training import ridge
from compgen_jax.types import CheckpointError
from tests.helpers import REPO, load_config

# heavy: collected first (tests/conftest.py); the group: one worker builds the module's `workdir`
pytestmark = [pytest.mark.heavy, pytest.mark.xdist_group("images_eval")]

jax.config.update("jax_numpy_rank_promotion", "raise")


def test_sampler_returns_an_oracle_x0_exactly(monkeypatch):
  cfg = load_config("images", "tiny", **{"model.precondition": False})
  geo = scenes.geometry(cfg.scene)
  target = jax.random.uniform(jax.random.key(1), (3, geo.height, geo.width, 3))
  feats = lambda x: (x.reshape(x.shape[0], -1)[:, :5],)
  monkeypatch.setattr(model_lib, "apply", lambda p, x, t, c, m, g: (target, feats(x)))
  shapes = jnp.zeros((3, geo.num_slots), jnp.int32)
  x, kept = sampler.sample(None, jax.random.key(0), shapes, shapes, cfg, geo, keep_steps=(0, 2))
  np.testing.assert_allclose(x, target, atol=1e-5)
  noise = jax.random.normal(jax.random.key(0), target.shape)
  np.testing.assert_allclose(kept[0][0], feats(noise)[0], atol=1e-6)  # step 0 sees pure noise
  assert kept[0].shape == (2, 3, 5)


def test_flow_loss_is_zero_for_a_perfect_x0_and_the_ema_moves_toward_params():
  cfg = load_config("images", "tiny")
  geo = scenes.geometry(cfg.scene)
  params = model_lib.init(jax.random.key(0), cfg.model, geo)
  assert float(model_lib.flow_loss(params, jnp.zeros((2, 16, 16, 3)), jnp.zeros((2,)),
                                   jnp.zeros((2, 16, 16, 3)), jnp.zeros((2, 9)), cfg.model,
                                   geo)) >= 0.0
  zeros = jax.tree.map(jnp.zeros_like, params)
  half = model_lib.ema_update(zeros, params, 0.5)
  jax.tree.map(lambda h, p: np.testing.assert_allclose(h, 0.5 * p), half, params)


def test_probe_recovers_a_planted_linear_code():
  cfg = load_config("images", "tiny", **{"scene.num_shapes": 4, "scene.num_colours": 3})
  geo = scenes.geometry(cfg.scene)
  rng = np.random.default_rng(0)
  n = 400
  shapes = rng.integers(0, 4, (n, geo.num_slots))
  colours = rng.integers(0, 3, (n, geo.num_slots))
  y = probes.one_hot_targets(jnp.asarray(shapes), jnp.asarray(colours), geo)
  mix = rng.normal(size=(y.shape[1], 40))
  x = jnp.asarray(np.asarray(y) @ mix + 0.01 * rng.normal(size=(n, 40)), jnp.float32)
  w, b = ridge.ridge_fit(x[:300], y[:300], jnp.asarray([1e-3]))
  acc, recall = probes.scores(ridge.ridge_predict(w, b, x[300:])[0], jnp.asarray(shapes[300:]),
                              jnp.asarray(colours[300:]), geo)
  np.testing.assert_array_equal(acc, np.ones((geo.num_slots, 2)))
  assert recall.shape == (geo.num_slots, 2, 4) and np.all(np.isnan(recall[:, 1, 3]))
  shuffled = probes.scores(ridge.ridge_predict(w, b, x[300:])[0],
                           jnp.asarray(rng.permutation(shapes[300:])),
                           jnp.asarray(colours[300:]), geo)[0]
  assert float(shuffled[:, 0].mean()) < 0.5


def test_correlation_statistics_against_direct_formulas():
  rng = np.random.default_rng(0)
  z = rng.normal(size=50)
  x, y = z + 0.5 * rng.normal(size=50), z + 0.5 * rng.normal(size=50)
  r = np.corrcoef([x, y, z])
  formula = (r[0, 1] - r[0, 2] * r[1, 2]) / np.sqrt((1 - r[0, 2] ** 2) * (1 - r[1, 2] ** 2))
  assert analysis.partial(x, y, z) == pytest.approx(formula, abs=1e-9)
  assert analysis.spearman([1, 2, 3, 4], [10, 20, 25, 1000]) == pytest.approx(1.0)
  assert analysis.spearman([1, 2, 2, 3], [1, 2, 2, 3]) == pytest.approx(1.0)


def test_tables_show_every_metric_and_decodability_the_rows_carry():
  from compgen_jax.images import report
  rows = [{"program": "p", "coverage": c, "n_train": 4, "seed": s, "id/success": 1.0,
           "ood/success": c, "id/shape_acc": 1.0, "ood/novelty": 0.5,
           "probe/all/t1/ood_acc": c, "probe/all/t05/ood_acc": c / 2,
           "probe/all/step0/layer0/ood_acc": 0.1} for c in (0.25, 0.5) for s in (0, 1)]
  header = report.level_table(rows).splitlines()[0].split(" | ")
  # the known columns first (NaN where the rows lack one), then the new ones, sorted; not the
  # training combinations' slot accuracy nor a single layer's probe
  assert header[4:] == ["id/success", "ood/success", "ood/shape_acc", "ood/colour_acc",
                        "ood/rejected", "ood/novelty", *analysis.DECODABILITY,
                        "probe/all/t05/ood_acc |"]
  corr, stats = report.correlation_table(rows)
  assert "| probe/all/t05/ood_acc | 4 |" in corr and stats["probe/all/t05/ood_acc"]["n"] == 4


def _binary(name, *args):
  return subprocess.run([sys.executable, os.path.join(REPO, "experiments", name), *args],
                        capture_output=True, text=True, cwd=REPO, timeout=600)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
  # the uniform binaries in turn: train, evaluate and probe the latest checkpoint, report
  wd = str(tmp_path_factory.mktemp("images") / "tiny")
  for name, *args in (("train.py", "--config=configs/images.py:tiny"), ("evaluate.py",),
                      ("probe.py",), ("report.py",)):
    flag = "--dir" if name == "report.py" else "--workdir"
    out = _binary(name, *args, f"{flag}={wd}")
    assert out.returncode == 0, (name, out.stderr[-3000:])
  return wd


def test_binary_trains_evaluates_probes_and_reports(workdir):
  for name in ("config.json", "metrics.jsonl", "checkpoints", workdir_lib.EVAL_FILE,
               workdir_lib.PROBE_FILE, "report.md", "success_vs_coverage.png", "timings.jsonl"):
    assert os.path.exists(os.path.join(workdir, name)), name
  assert len(os.listdir(os.path.join(workdir, evaluate.GRID_DIR))) == 2  # seed 0, two coverages
  rows = metric_writer.read_rows(os.path.join(workdir, workdir_lib.EVAL_FILE))
  assert len(rows) == 4 and all(0.0 <= r["ood/success"] <= 1.0 for r in rows)
  prows = metric_writer.read_rows(os.path.join(workdir, workdir_lib.PROBE_FILE))
  assert len(prows) == 4 and all(0.0 <= r["probe/all/t1/ood_acc"] <= 1.0 for r in prows)


def test_evaluation_from_the_checkpoint_reproduces_the_rows(workdir):
  # through the uniform binary: evaluate.py reads the application from the workdir's config.json
  path = os.path.join(workdir, workdir_lib.EVAL_FILE)
  before = metric_writer.read_rows(path)
  os.remove(path)  # the binary must write every row again
  out = subprocess.run([sys.executable, os.path.join(REPO, "experiments", "evaluate.py"),
                        f"--workdir={workdir}"], capture_output=True, text=True, cwd=REPO,
                       timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  assert metric_writer.read_rows(path) == before and "evaluate done" in out.stdout


def test_every_checkpoint_pass_writes_each_step_once(workdir, tmp_path):
  # the pass mechanism of every family (training.passes: select_steps / write_pass): tiny
  # checkpoints at steps 50 and 100; a re-run replaces its steps' rows instead of appending copies
  cfg = load_config("images", "tiny")
  wd = str(tmp_path / "copy")
  shutil.copytree(workdir, wd)
  latest = metric_writer.read_rows(os.path.join(wd, workdir_lib.EVAL_FILE))
  for _ in range(2):
    evaluate.evaluate_workdir(cfg, wd, grids=False, every=True)
    probes.probe_workdir(cfg, wd, every=True)
  for name in (workdir_lib.EVAL_FILE, workdir_lib.PROBE_FILE):
    rows = metric_writer.read_rows(os.path.join(wd, name))
    assert [(r["step"], r["run"]) for r in rows] == [(s, r) for s in (50, 100) for r in range(4)]
  rows = metric_writer.read_rows(os.path.join(wd, workdir_lib.EVAL_FILE))
  assert [r["step"] for r in latest] == [100] * 4
  assert rows[4:] == latest  # step 100 again: the same rows
  with pytest.raises(CheckpointError, match="no checkpoint for step 70"):
    evaluate.evaluate_workdir(cfg, wd, step=70)


@pytest.mark.parametrize("override, field", [
    ("--config.split.coverage=(0.01,)", "split.coverage"),
    ("--config.optim.warmup_steps=100", "optim.warmup_steps"),  # tiny trains 100 steps
])
def test_bad_config_exits_2_with_one_line(tmp_path, override, field):
  wd = tmp_path / "bad"
  out = _binary("train.py", "--config=configs/images.py:tiny", f"--workdir={wd}", override)
  assert out.returncode == 2
  assert out.stderr.strip().count("\n") == 0 and field in out.stderr, out.stderr
  assert not wd.exists()
