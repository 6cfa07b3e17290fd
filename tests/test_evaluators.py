"""Evaluator registry: hotness sampling, metric keys per family, the `evals` config section
(cadences, per-evaluator settings, validation before anything is written) and clear errors."""

import os

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.scaling import evaluators, runs
from compgen_jax.scaling import train as scaling_train
from compgen_jax.tasks import combinatorics, splits
from compgen_jax.tasks import registry as families
from compgen_jax.types import ConfigError
from tests.helpers import load_config

jax.config.update("jax_numpy_rank_promotion", "raise")

M, K = 7, 3


def _split(seed: int, frac: float = 0.4, drop_singletons: bool = False):
  T = combinatorics.num_tasks(M, K)
  ood = np.random.default_rng(seed).uniform(size=T) < frac
  if drop_singletons:
    ood[:M] = False
  return splits.split_from_mask(ood), ood


@pytest.mark.parametrize("drop_singletons", [False, True])
def test_hotness_draws_have_h_modules_and_are_held_out(drop_singletons):
  split, ood = _split(0, drop_singletons=drop_singletons)
  bits_T = jnp.asarray(combinatorics.task_bits(M, K), jnp.int32)
  hot_T = combinatorics.task_table(M, K).sum(1)
  draw = jax.jit(evaluators.hotness_indices, static_argnums=(4, 5))
  for h in range(1, K + 1):
    idx_B, count = draw(jax.random.key(h), jnp.asarray(split.ood_idx), jnp.asarray(split.n_ood),
                        bits_T, h, 256)
    assert int(count) == int(np.sum(ood & (hot_T == h)))
    if int(count):
      idx_B = np.asarray(idx_B)
      assert ood[idx_B].all() and (hot_T[idx_B] == h).all()
      # Draws cover the eligible tasks (at most a few dozen here, 256 draws).
      assert set(idx_B.tolist()) == set(np.flatnonzero(ood & (hot_T == h)).tolist())
  if drop_singletons:
    assert int(draw(jax.random.key(0), jnp.asarray(split.ood_idx), jnp.asarray(split.n_ood),
                    bits_T, 1, 8)[1]) == 0


def test_random_subsets_have_exactly_h_modules():
  for h in (K + 1, M):
    khot = np.asarray(evaluators.random_khot(jax.random.key(h), 64, M, h))
    assert set(np.unique(khot)) <= {0.0, 1.0} and (khot.sum(1) == h).all()


@pytest.fixture(scope="module")
def tiny():
  cfg = load_config("hyperteacher", "tiny")
  grid = runs.run_grid(cfg)
  runs.precompute_splits(cfg, grid)
  states = scaling_train.make_init(cfg)(*runs.run_inputs(cfg, grid))
  return cfg, states, scaling_train.task_bits(cfg)


def test_all_evaluators_give_their_keys_per_run(tiny):
  cfg, states, bits_T = tiny
  out = scaling_train.make_evaluate(cfg, evaluators.applicable(cfg))(states, bits_T)
  quantiles = evaluators.default_settings("r2_quantiles").quantiles
  levels = evaluators.hotness_levels(cfg, evaluators.default_settings("ood_hotness").hotness_above)
  assert levels == (1, 2, 3, 4)  # tiny: K=2, and the default hotness_above=2 levels above it
  want = {"id/r2", "id/loss", "ood/r2", "ood/loss"}
  want |= {f"ood_h{h}/{m}" for h in levels for m in ("r2", "loss")}
  want |= {f"{s}/{evaluators.quantile_name(q)}" for s in ("id", "ood") for q in quantiles}
  assert set(out) == want
  chex.assert_shape(list(out.values()), (cfg.num_seeds,))
  q = np.stack([np.asarray(out[f"ood/{evaluators.quantile_name(q)}"]) for q in quantiles])
  assert (np.diff(q, axis=0) >= 0).all()
  # id / ood do not depend on which other evaluators run with them.
  alone = scaling_train.make_evaluate(cfg, ("ood",))(states, bits_T)
  np.testing.assert_array_equal(alone["ood/r2"], out["ood/r2"])


def _accuracy_loss(pred, batch):
  right_BxN = jnp.sign(pred[..., 0]) == jnp.sign(batch.y[..., 0])
  return 0.0, {"loss": jnp.zeros(()), "acc": right_BxN.mean(), "acc_all": right_BxN.all(1).mean()}


def test_classification_family_reports_accuracy_and_refuses_regression_only(tiny, monkeypatch):
  cfg, states, bits_T = tiny
  fake = families.REGISTRY["hyperteacher"]._replace(loss=_accuracy_loss)
  monkeypatch.setitem(families.REGISTRY, "fake_classes", fake)
  cfg = load_config("hyperteacher", "tiny", **{"task.family": "fake_classes"})
  # ood_hotness follows the family's module_weights, r2_quantiles its regression loss.
  assert evaluators.applicable(cfg) == ("id", "ood", "ood_hotness")
  monkeypatch.setitem(families.REGISTRY, "fake_classes", fake._replace(module_weights=False))
  assert evaluators.applicable(cfg) == ("id", "ood")
  out = scaling_train.make_evaluate(cfg, ("id",))(states, bits_T)
  assert set(out) == {"id/loss", "id/acc", "id/acc_all"}
  assert np.all(np.asarray(out["id/acc_all"]) <= np.asarray(out["id/acc"]))
  with pytest.raises(ConfigError, match="more than K modules"):
    scaling_train.make_evaluate(cfg, ("ood_hotness",))
  with pytest.raises(ConfigError, match="regression"):
    scaling_train.make_evaluate(cfg, ("r2_quantiles",))


def test_unknown_evaluator_is_a_config_error():
  cfg = load_config("hyperteacher", "tiny")
  with pytest.raises(ConfigError, match="'evals.nope'.*unknown 'nope'; allowed: id, ood"):
    scaling_train.make_evaluate(cfg, ("id", "nope"))


def _with_evals(family: str, evals: dict, **overrides):
  """The tiny preset of `family` with `evals` entries merged into (or added to) cfg.evals."""
  cfg = load_config(family, "tiny", **overrides)
  with cfg.unlocked():
    for name, entry in evals.items():
      if name in cfg.evals:
        cfg.evals[name].update(entry)
      else:
        cfg.evals[name] = entry
  return cfg


BAD_EVALS = [  # tiny: train.chunk_size 50
    ("hyperteacher", {"nope": {}}, "evals.nope"),
    ("hyperteacher", {"id": {"bogus": 1}}, "evals.id.bogus"),
    ("hyperteacher", {"id": {"hotness_above": 2}}, "evals.id.hotness_above"),  # not id's setting
    ("hyperteacher", {"id": {"every": 70}}, "evals.id.every"),
    ("hyperteacher", {"ood": {"every": -50}}, "evals.ood.every"),
    ("hyperteacher", {"ood_hotness": {"every": 25}}, "evals.ood_hotness.every"),
    ("hyperteacher", {"ood": {"num_tasks": 0}}, "evals.ood.num_tasks"),
    ("hyperteacher", {"ood_hotness": {"hotness_above": -1}}, "evals.ood_hotness.hotness_above"),
    ("hyperteacher", {"r2_quantiles": {"quantiles": (0.5, 1.5)}}, "evals.r2_quantiles.quantiles"),
    ("hyperteacher", {"r2_quantiles": {"quantiles": ()}}, "evals.r2_quantiles.quantiles"),
    ("preference", {"ood_hotness": {}}, "evals.ood_hotness"),  # hyperteacher only
    ("preference", {"r2_quantiles": {}}, "evals.r2_quantiles"),  # regression only
]


@pytest.mark.parametrize("family, evals, field", BAD_EVALS)
def test_bad_evals_entry_names_its_field_before_anything_is_written(family, evals, field,
                                                                    tmp_path):
  cfg = _with_evals(family, evals)
  workdir = str(tmp_path / "never")
  with pytest.raises(ConfigError) as e:
    scaling_train.train_and_evaluate(cfg, workdir)
  assert e.value.field == field, str(e.value)
  assert not os.path.exists(workdir)


def test_each_evaluator_runs_at_its_own_cadence_and_all_at_the_last_step(tmp_path):
  """id every chunk, ood every second chunk, ood_hotness (every=0) only at the last step; the
  last step (250) is no multiple of ood's 100, and still evaluates everything."""
  cfg = _with_evals("hyperteacher", {"id": {"every": 50}, "ood": {"every": 100},
                                     "ood_hotness": {"num_tasks": 16}},
                    **{"num_seeds": 1, "train.num_steps": 250, "train.checkpoint_every": 250})
  scaling_train.train_and_evaluate(cfg, str(tmp_path / "wd"))
  rows = metric_writer.read_rows(str(tmp_path / "wd" / workdir_lib.METRICS_FILE))

  def steps_with(key):
    return sorted(r["step"] for r in rows if key in r)

  assert steps_with("id/r2") == [50, 100, 150, 200, 250]
  assert steps_with("ood/r2") == [100, 200, 250]
  assert steps_with("ood_h4/r2") == [250]  # default hotness_above=2: levels up to K+2 = 4
  assert len(steps_with("train/loss")) == 250 // cfg.train.log_every  # one row per window


def test_num_tasks_is_per_evaluator(tiny):
  """More ood tasks change ood's numbers and leave id's (drawn with its own num_tasks) alone."""
  cfg, states, bits_T = tiny
  base = scaling_train.make_evaluate(cfg)(states, bits_T)
  more = load_config("hyperteacher", "tiny", **{"evals.ood.num_tasks": 128})
  out = scaling_train.make_evaluate(more)(states, bits_T)
  assert set(out) == set(base) == {"id/r2", "id/loss", "ood/r2", "ood/loss"}
  np.testing.assert_array_equal(out["id/r2"], base["id/r2"])
  assert not np.any(np.asarray(out["ood/r2"]) == np.asarray(base["ood/r2"]))


def test_a_config_without_evals_is_a_clear_error():
  cfg = load_config("hyperteacher", "tiny").to_dict()
  del cfg["evals"]
  with pytest.raises(ConfigError, match="'evals'.*older version"):
    evaluators.validate(ml_collections.ConfigDict(cfg))
