"""Ridge probes: exact solves, planted maps recovered, padding and stacking invariants."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax.scaling import activations, batches, passes, probes, runs
from compgen_jax.scaling import train as scaling_train
from compgen_jax.training import ridge
from compgen_jax.types import ConfigError
from tests.helpers import load_config

jax.config.update("jax_numpy_rank_promotion", "raise")

LAMBDAS = (0.1, 1.0, 10.0)


def _reference(x, y, lam):
  """float64 normal equations with intercept, one target column at a time."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  xc = x - x.mean(0)
  w = np.stack([np.linalg.solve(xc.T @ xc + lam * np.eye(x.shape[1]), xc.T @ (col - col.mean()))
                for col in y.T], axis=1)
  return w, y.mean(0) - x.mean(0) @ w


@pytest.mark.parametrize("n, d", [(120, 20), (30, 50)])  # Gram (N >= D) and kernel (N < D) paths
def test_all_at_once_equals_per_target_and_per_lambda_solves(n, d):
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(n, d)), jnp.float32)
  y = jnp.asarray(rng.normal(size=(n, 4)) + 3.0, jnp.float32)
  w, b = jax.jit(ridge.ridge_fit)(x, y, jnp.asarray(LAMBDAS))
  chex.assert_shape((w, b), ((len(LAMBDAS), d, 4), (len(LAMBDAS), 4)))
  for a, lam in enumerate(LAMBDAS):
    w_ref, b_ref = _reference(x, y, lam)
    np.testing.assert_allclose(w[a], w_ref, atol=2e-5)
    np.testing.assert_allclose(b[a], b_ref, atol=2e-5)
    for k in range(4):  # one target alone gives the same column
      w_k, b_k = ridge.ridge_fit(x, y[:, k:k + 1], jnp.asarray([lam]))
      np.testing.assert_allclose(w_k[0, :, 0], w[a, :, k], atol=2e-5)
      np.testing.assert_allclose(b_k[0, 0], b[a, k], atol=2e-5)


def test_probe_recovers_planted_map_and_not_random_target():
  rng = np.random.default_rng(1)
  n, d = 2000, 24
  x = rng.normal(size=(n, d))
  planted = x @ rng.normal(size=(d, 3)) + rng.normal(size=3)[None, :]
  unrelated = rng.normal(size=(n, 2))
  y = jnp.asarray(np.concatenate([planted, unrelated], axis=1), jnp.float32)
  x = jnp.asarray(x, jnp.float32)
  half = n // 2
  r2 = ridge.fit_and_score(x[:half], y[:half], {"test": (x[half:], y[half:])},
                            jnp.asarray([1.0]))["test"][0]
  assert np.all(np.asarray(r2[:3]) > 0.999)
  assert np.all(np.abs(np.asarray(r2[3:])) < 0.05)


def test_constant_target_column_is_nan():
  x = jnp.asarray(np.random.default_rng(2).normal(size=(50, 3)), jnp.float32)
  y = jnp.concatenate([x[:, :1], jnp.zeros((50, 1)), jnp.full((50, 1), 0.7)], axis=1)
  r2 = np.asarray(ridge.r2_per_target(y, y))
  assert r2[0] == 1.0 and np.isnan(r2[1:]).all()


def test_zero_padding_leaves_the_probe_unchanged():
  rng = np.random.default_rng(3)
  x = jnp.asarray(rng.normal(size=(80, 6)), jnp.float32)
  y = jnp.asarray(rng.normal(size=(80, 2)), jnp.float32)
  stacked = activations.stack({"narrow": x, "wide": jnp.zeros((80, 10))})
  chex.assert_shape(stacked, (2, 80, 10))
  lam = jnp.asarray([1.0])
  want = ridge.ridge_predict(*ridge.ridge_fit(x, y, lam), x)
  got = ridge.ridge_predict(*ridge.ridge_fit(stacked[0], y, lam), stacked[0])
  np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.fixture(scope="module")
def tiny_states():
  cfg = load_config("hyperteacher", "tiny", **{"probe.num_tasks": 256})
  grid = runs.run_grid(cfg)
  runs.precompute_splits(cfg, grid)
  return cfg, scaling_train.make_init(cfg)(*runs.run_inputs(cfg, grid))


def test_probe_pass_shapes_names_and_input_decoder(tiny_states):
  cfg, states = tiny_states
  one = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype), states)
  names = activations.layer_names(one, cfg)
  assert names == ("input", "dense_0", "dense_1", "readout")
  out = probes.make_probe(cfg)(states, scaling_train.task_bits(cfg))
  assert sorted(out) == ["theta/id", "theta/ood", "z/id", "z/ood"]
  chex.assert_shape(list(out.values()), (cfg.num_seeds, len(names), len(cfg.probe.lambdas)))
  # phi(z) = z for the identity encoding: the input decoder is nearly exact (ridge shrinkage).
  assert np.all(np.asarray(out["z/id"][:, 0]) > 0.97)
  assert np.all(np.asarray(out["z/ood"][:, 0]) > 0.97)
  rows = probes.rows(out, names, cfg, 0, runs.run_grid(cfg))
  assert len(rows) == cfg.num_seeds * len(cfg.probe.lambdas)
  assert rows[0]["z/best_layer"] in names[2:] and "z/input/ood_r2" in rows[0]  # skip_first


def test_capture_reads_the_last_sample(tiny_states):
  cfg, states = tiny_states
  state = jax.tree.map(lambda a: a[0], states)
  bits_B = jnp.asarray([1, 3, 6], jnp.int32)
  batch = batches.batch_for_bits(state, bits_B, jax.random.key(0), cfg)
  acts = activations.capture(state, batch, cfg)
  _, full = batches.predict(state.params, state, batch, cfg)
  np.testing.assert_array_equal(acts["input"], batch.z)  # identity encoding
  for name, a in full.items():
    np.testing.assert_array_equal(acts[name], a[:, -1, :])


@pytest.mark.parametrize("field, value, match", [
    ("lambdas", (0.0,), "probe.lambdas"), ("num_tasks", 7, "probe.num_tasks"),
    ("targets", ("z", "w"), "probe.targets")])
def test_bad_probe_settings_are_config_errors(field, value, match):
  cfg = load_config("hyperteacher", "tiny", **{f"probe.{field}": value})
  with pytest.raises(ConfigError, match=match):
    probes.validate(cfg)


def test_theta_target_needs_the_hyperteacher_family():
  cfg = load_config("hyperteacher", "tiny", **{"task.family": "preference"})
  with pytest.raises(ConfigError, match="hyperteacher"):
    probes.validate(cfg)


def test_a_config_without_the_probe_section_is_refused_not_filled_in():
  # no defaults are filled in for an older config.json: the pass names what is missing
  cfg = load_config("hyperteacher", "tiny")
  with cfg.unlocked():
    del cfg["probe"]
    del cfg["encoding"]["keep_zeros"]
  assert passes.missing_fields(cfg) == ["encoding.keep_zeros", "probe"]
