"""Evaluator registry: hotness sampling, metric keys per family, and clear errors."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax.evaluation import evaluators
from compgen_jax.tasks import combinatorics, supports
from compgen_jax.tasks import registry as families
from compgen_jax.training import loop, runs
from compgen_jax.types import ConfigError
from tests.helpers import load_config

jax.config.update("jax_numpy_rank_promotion", "raise")

M, K = 7, 3


def _split(seed: int, frac: float = 0.4, drop_singletons: bool = False):
  T = combinatorics.num_tasks(M, K)
  ood = np.random.default_rng(seed).uniform(size=T) < frac
  if drop_singletons:
    ood[:M] = False
  return supports.split_from_mask(ood), ood


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
  return cfg, loop.make_init(cfg)(*runs.run_inputs(cfg, grid)), loop.task_bits(cfg)


def test_all_evaluators_give_their_keys_per_run(tiny):
  cfg, states, bits_T = tiny
  out = evaluators.make_evaluate(cfg, evaluators.applicable(cfg))(states, bits_T)
  levels = evaluators.hotness_levels(cfg)
  assert levels == (1, 2, 3, 4)  # tiny: K=2, and probe.hotness_above=2 levels above it
  want = {"id/r2", "id/loss", "ood/r2", "ood/loss"}
  want |= {f"ood_h{h}/{m}" for h in levels for m in ("r2", "loss")}
  want |= {f"{s}/{evaluators.quantile_name(q)}" for s in ("id", "ood")
           for q in cfg.probe.quantiles}
  assert set(out) == want
  chex.assert_shape(list(out.values()), (cfg.num_seeds,))
  q = np.stack([np.asarray(out[f"ood/{evaluators.quantile_name(q)}"])
                for q in cfg.probe.quantiles])
  assert (np.diff(q, axis=0) >= 0).all()
  # id / ood do not depend on which other evaluators run with them.
  alone = evaluators.make_evaluate(cfg, ("ood",))(states, bits_T)
  np.testing.assert_array_equal(alone["ood/r2"], out["ood/r2"])


def _accuracy_loss(pred, batch):
  right_BxN = jnp.sign(pred[..., 0]) == jnp.sign(batch.y[..., 0])
  return 0.0, {"loss": jnp.zeros(()), "acc": right_BxN.mean(), "acc_all": right_BxN.all(1).mean()}


def test_classification_family_reports_accuracy_and_refuses_regression_only(tiny, monkeypatch):
  cfg, states, bits_T = tiny
  fake = families.REGISTRY["hyperteacher"]._replace(loss=_accuracy_loss)
  monkeypatch.setitem(families.REGISTRY, "fake_classes", fake)
  cfg = load_config("hyperteacher", "tiny", **{"task.family": "fake_classes"})
  assert evaluators.applicable(cfg) == ("id", "ood")
  out = evaluators.make_evaluate(cfg, ("id",))(states, bits_T)
  assert set(out) == {"id/loss", "id/acc", "id/acc_all"}
  assert np.all(np.asarray(out["id/acc_all"]) <= np.asarray(out["id/acc"]))
  with pytest.raises(ConfigError, match="hyperteacher family only"):
    evaluators.make_evaluate(cfg, ("ood_hotness",))
  with pytest.raises(ConfigError, match="regression"):
    evaluators.make_evaluate(cfg, ("r2_quantiles",))


def test_unknown_evaluator_is_a_config_error():
  cfg = load_config("hyperteacher", "tiny")
  with pytest.raises(ConfigError, match="unknown 'nope'"):
    evaluators.make_evaluate(cfg, ("id", "nope"))
