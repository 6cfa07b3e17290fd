"""The teacher equals its formula; latents follow the paper's weight kinds; streams differ."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax import rng
from compgen_jax.tasks import combinatorics, hyperteacher, latents
from compgen_jax.types import ConfigError
from tests.helpers import load_config


def _cfg(**kw):
  cfg = hyperteacher.default_config()
  cfg.update(dict(num_modules=6, max_hotness=2, input_dim=5, hidden_dim=7, output_dim=3,
                  num_samples=4), **kw)
  return cfg


def _numpy_teacher(params, z, x, K):
  """y = relu(... relu(x W_1 + b_1) ...) Omega, W_l = sum_m z_m / sqrt(K) Theta_m^l, per task."""
  zt = np.asarray(z, np.float64) / np.sqrt(K)
  ys = []
  for b in range(zt.shape[0]):
    a = np.asarray(x[b], np.float64)
    for theta, beta in zip(params["theta"], params["beta"], strict=True):
      w = sum(zt[b, m] * np.asarray(theta[m], np.float64) for m in range(zt.shape[1]))
      bias = sum(zt[b, m] * np.asarray(beta[m], np.float64) for m in range(zt.shape[1]))
      a = np.maximum(a @ w + bias, 0.0)
    ys.append(a @ np.asarray(params["omega"], np.float64))
  return np.stack(ys)


def test_teacher_equals_numpy_formula():
  cfg = _cfg()
  params = hyperteacher.init(jax.random.key(0), cfg)
  khot = latents.khot_from_bits(jnp.asarray([0b000011, 0b100000, 0b010100]), 6)
  z = latents.sample_latent(jax.random.key(1), khot, "discrete")
  x = jax.random.uniform(jax.random.key(2), (3, 4, 5), minval=-1, maxval=1)
  got = hyperteacher.apply(params, z, x, cfg.max_hotness)
  np.testing.assert_allclose(got, _numpy_teacher(params, z, x, 2), rtol=1e-5, atol=1e-5)


def test_shapes_and_init_statistics():
  params = hyperteacher.init(jax.random.key(0), _cfg(num_modules=16, input_dim=16,
                                                     hidden_dim=16, output_dim=16))
  assert params["theta"][0].shape == (16, 16, 16)
  assert params["beta"][0].shape == (16, 16)
  assert params["omega"].shape == (16, 16)
  beta = np.asarray(params["beta"][0])
  assert beta.min() >= 0.0 and beta.max() < 0.5


def test_init_variance_is_the_papers_formula():
  """Var(Theta_m) = sqrt(3) / d_in for EACH module (the module axis is not fan-in), Var(Omega) =
  sqrt(3) / H; d_in, H and M differ so a wrong fan-in (M * d_in, or d_out) cannot pass."""
  M, d_in, H, O = 24, 8, 32, 12
  params = hyperteacher.init(jax.random.key(0), _cfg(num_modules=M, input_dim=d_in, hidden_dim=H,
                                                     output_dim=O, num_hidden_layers=2))
  theta0, theta1 = (np.asarray(t, np.float64) for t in params["theta"])
  assert np.var(theta0) == pytest.approx(np.sqrt(3) / d_in, rel=0.06)
  assert np.var(theta1) == pytest.approx(np.sqrt(3) / H, rel=0.06)
  # Per module as well: each module on its own is a variance-scaled d_in x H matrix.
  per_module = theta0.reshape(M, -1).var(axis=1)
  assert np.median(per_module) == pytest.approx(np.sqrt(3) / d_in, rel=0.12)
  assert np.var(np.asarray(params["omega"], np.float64)) == pytest.approx(np.sqrt(3) / H, rel=0.1)
  # Truncated normal at two standard deviations of the untruncated law.
  std = np.sqrt(np.sqrt(3) / d_in) / 0.87962566103423978
  assert np.abs(theta0).max() <= 2 * std + 1e-6


def _numpy_teacher_stats(seed: int, M: int, K: int, d: int, num_tasks: int, N: int):
  """Independent float64 re-implementation of the paper's teacher at I = H = O = d: returns the
  per-task output variance (mean over tasks and outputs) and the std of y."""
  rs = np.random.default_rng(seed)

  def truncated(shape, fan_in):
    std = np.sqrt(np.sqrt(3.0) / fan_in) / 0.87962566103423978
    out = rs.standard_normal(shape)
    bad = np.abs(out) > 2
    while bad.any():
      out[bad] = rs.standard_normal(bad.sum())
      bad = np.abs(out) > 2
    return out * std

  theta, omega = truncated((M, d, d), d), truncated((d, d), d)
  beta = rs.uniform(0, 0.5, (M, d))
  subsets = [c for k in range(1, K + 1) for c in itertools.combinations(range(M), k)]
  var, ys = [], []
  for t in rs.integers(0, len(subsets), num_tasks):
    z = np.zeros(M)
    z[list(subsets[t])] = rs.choice(np.linspace(0.5, 1.0, 6), len(subsets[t]))
    zt = z / np.sqrt(K)
    x = rs.uniform(-1, 1, (N, d))
    y = np.maximum(x @ np.tensordot(zt, theta, 1) + zt @ beta, 0) @ omega
    var.append(y.var(axis=0).mean())
    ys.append(y)
  return float(np.mean(var)), float(np.std(np.concatenate(ys)))


def test_teacher_statistics_match_independent_reimplementation():
  """At the paper's setting (M=16, K=3, I=H=O=16, 16 samples) our teacher's per-task output
  variance and y std fall inside the spread of an independent numpy teacher over seeds (the
  reference gives ~0.3 and ~0.8; the fan_in = M * d_in bug gave 0.03 and 0.44)."""
  M, K, d, N = 16, 3, 16, 16
  ref = np.array([_numpy_teacher_stats(s, M, K, d, 1024, N) for s in range(6)])
  cfg = _cfg(num_modules=M, max_hotness=K, input_dim=d, hidden_dim=d, output_dim=d,
             num_samples=N)
  bits = jnp.asarray(combinatorics.task_bits(M, K), jnp.uint32)
  ours = []
  for s in range(6):
    params = hyperteacher.init(jax.random.key(s), cfg)
    idx = jax.random.randint(jax.random.key(100 + s), (1024,), 0, bits.shape[0])
    batch = hyperteacher.sample_batch(params, latents.khot_from_bits(bits[idx], M),
                                      jax.random.key(200 + s), cfg)
    y = np.asarray(batch.y, np.float64)
    ours.append((y.var(axis=1).mean(), y.std()))
  ours = np.array(ours)
  for col, name in enumerate(("per-task variance", "y std")):
    lo, hi = ref[:, col].min(), ref[:, col].max()
    slack = 0.25 * (hi - lo) + 0.05 * ref[:, col].mean()
    assert lo - slack <= ours[:, col].mean() <= hi + slack, (name, ours[:, col], ref[:, col])
  assert 0.2 < ref[:, 0].mean() < 0.45 and 0.65 < ref[:, 1].mean() < 0.95


def test_weights_and_biases_use_separate_streams():
  cfg = _cfg()
  key = jax.random.key(0)
  params = hyperteacher.init(key, cfg)
  key_b = jax.random.split(rng.stream(key, "teacher_biases"), 1)[0]
  np.testing.assert_array_equal(params["beta"][0],
                                jax.random.uniform(key_b, (6, 7), maxval=0.5))
  other = hyperteacher.init(jax.random.key(1), cfg)
  assert not np.allclose(params["theta"][0], other["theta"][0])


@pytest.mark.parametrize("kind", latents.WEIGHT_KINDS)
def test_latent_kinds(kind):
  khot = latents.khot_from_bits(jnp.arange(1, 64), 6)
  z = np.asarray(latents.sample_latent(jax.random.key(3), khot, kind))
  active = np.asarray(khot) > 0
  assert np.all(z[~active] == 0)
  if kind == "khot":
    assert np.all(z[active] == 1)
  elif kind == "discrete":
    allowed = set(np.round(latents.DISCRETE_WEIGHTS, 4))
    assert set(np.round(z[active].astype(float), 4)) <= allowed
  else:
    assert np.all((z[active] > 0.5) & (z[active] < 1.0))


def test_multi_layer_teacher_shapes():
  cfg = _cfg(num_hidden_layers=3)
  params = hyperteacher.init(jax.random.key(0), cfg)
  assert len(params["theta"]) == 3
  khot = latents.khot_from_bits(jnp.asarray([3, 5]), 6)
  batch = hyperteacher.sample_batch(params, khot, jax.random.key(1), cfg, num_shots=10)
  assert batch.y.shape == (2, 4, 3)
  assert batch.context.shape == (2, 10, 8)


def test_train_test_ood_streams_differ():
  key = jax.random.key(0)
  names = ["train", "test", "ood", "ood_hotness", "probe", "split", "encoding", "student"]
  data = {n: tuple(np.asarray(jax.random.key_data(rng.stream(key, n)))) for n in names}
  assert len(set(data.values())) == len(names)
  cfg = _cfg()
  params = hyperteacher.init(key, cfg)
  khot = latents.khot_from_bits(jnp.asarray([3, 5]), 6)
  xs = [hyperteacher.sample_batch(params, khot, rng.stream(key, n), cfg).x for n in names[:3]]
  assert not np.allclose(xs[0], xs[1]) and not np.allclose(xs[1], xs[2])
  # Every stream has its own constant, and a name outside rng.STREAMS is refused (a typo would
  # otherwise open a new stream silently); "name/<suffix>" streams share the name's entry.
  assert len({rng.stream_id(n) for n in rng.STREAMS}) == len(rng.STREAMS)
  with pytest.raises(ValueError, match="unknown random stream 'tran'"):
    rng.stream(key, "tran")
  assert not np.array_equal(jax.random.key_data(rng.stream(key, "task/a")),
                            jax.random.key_data(rng.stream(key, "task/b")))
  with pytest.raises(ValueError, match="unknown random stream"):
    rng.stream(key, "tasks/a")


def test_bad_task_config_raises():
  with pytest.raises(ConfigError, match="task.weights"):
    hyperteacher.validate(_cfg(weights="binary"))
  with pytest.raises(ConfigError, match="task.num_samples"):
    hyperteacher.validate(_cfg(num_samples=1))


@pytest.mark.parametrize("family, want", [
    # shared/papers/scaling_compgen.md: M=16, K=3, a quarter held out; MLP 4x1024 (preference
    # 2x1024); AdamW constant lr 3e-4, wd 3e-3 (preference 1e-4 / 1e-3); batch 128 tasks;
    # 100k steps (preference 3M); 3 seeds.
    ("hyperteacher", dict(M=16, K=3, frac=0.25, width=1024, depth=4, lr=3e-4, wd=3e-3,
                          steps=100_000)),
    ("preference", dict(M=16, K=3, frac=0.25, width=1024, depth=2, lr=1e-4, wd=1e-3,
                        steps=3_000_000)),
])
def test_paper_presets_are_the_papers_setting(family, want):
  cfg = load_config(family, "paper")
  got = dict(M=cfg.task.num_modules, K=cfg.task.max_hotness, frac=cfg.task.frac_ood,
             width=cfg.student.mlp.width, depth=cfg.student.mlp.depth,
             lr=cfg.optim.learning_rate, wd=cfg.optim.weight_decay, steps=cfg.train.num_steps)
  assert got == want
  assert (cfg.num_seeds, cfg.train.batch_size, cfg.optim.schedule, cfg.student.name) == (
      3, 128, "constant", "mlp")
