"""The Theorem 3.1 construction: bound, N^-2 rate, linear neuron count, format, validation."""

import importlib.util
import os

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax.students import mlp
from compgen_jax.tasks import hyperteacher
from compgen_jax.theory import construction, experiment, measure
from compgen_jax.types import ConfigError

M, K, I, H, O = 6, 3, 3, 2, 2
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _task_cfg(**overrides):
  cfg = hyperteacher.default_config()
  cfg.update(num_modules=M, max_hotness=K, input_dim=I, hidden_dim=H, output_dim=O)
  cfg.update(**overrides)
  return cfg


def _teacher(seed: int, **overrides) -> dict:
  return hyperteacher.init(jax.random.key(seed), _task_cfg(**overrides))


def _domain(seed: int, kind: str):
  key_t, key_w, key_x = jax.random.split(jax.random.key(100 + seed), 3)
  khot = measure.task_sample(key_t, M, K, max_tasks=64)
  z = measure.weighted_latents(key_w, jnp.asarray(khot), kind, 3)
  return z, measure.input_points(key_x, I, 3, 256)


def _theorem_config(preset: str = "tiny"):
  path = os.path.join(ROOT, "configs", "theorem.py")
  spec = importlib.util.spec_from_file_location("_theorem_config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(preset)


def test_params_are_the_mlp_students_tree():
  n = 5
  cfg = construction.student_config(I, H, n)
  # Shapes only (eval_shape): the numbers are checked through mlp.apply below.
  net = jax.eval_shape(construction.construct, _teacher(0), K, n)
  ref = jax.eval_shape(lambda key: mlp.init(key, M, I, O, cfg), jax.random.key(0))
  chex.assert_trees_all_equal_shapes_and_dtypes(net, ref)
  assert cfg.widths == (2 * I * H * n + H, H)


@pytest.mark.parametrize("kind", ["discrete", "continuous", "khot"])
def test_error_below_bound_for_random_teachers_and_tasks(kind):
  n = 16
  for seed in range(3):
    teacher = _teacher(seed, weights=kind)
    z, x = _domain(seed, kind)
    err = measure.sup_error(teacher, K, n, z, x, 2 ** 22, float64=True)
    sharp = float(construction.sharp_error_bound(teacher, K, n))
    assert 0 < err <= sharp <= float(construction.error_bound(teacher, K, n))


def test_float32_evaluation_through_mlp_apply_matches_teacher():
  n, teacher = 16, _teacher(1)
  z, x = _domain(1, "discrete")
  x_BxPxI = jnp.broadcast_to(x, z.shape[:1] + x.shape)
  pred, acts = mlp.apply(construction.construct(teacher, K, n), z, x_BxPxI, O,
                         construction.student_config(I, H, n))
  y = hyperteacher.apply(teacher, z, x_BxPxI, K)
  assert float(jnp.abs(pred - y).max()) <= float(construction.sharp_error_bound(teacher, K, n))
  # Layer 2 pre-activations approximate the teacher's s_h, so the probes see the teacher's units.
  assert acts["dense_1"].shape == z.shape[:1] + (x.shape[0], H)


def test_error_falls_about_4x_when_n_doubles():
  teacher = _teacher(2)
  z, x = _domain(2, "discrete")
  ns = (16, 32, 64)
  errs = [measure.sup_error(teacher, K, n, z, x, 2 ** 22, float64=True) for n in ns]
  ratios = np.asarray(errs[:-1]) / np.asarray(errs[1:])
  assert np.all((ratios > 2.5) & (ratios < 6.5)), ratios
  assert -2.4 < experiment.loglog_slope(ns, errs) < -1.6


def test_neuron_count_is_linear_in_modules():
  counts = np.asarray([construction.neuron_count(m, I, H, O, 10) for m in range(2, 30)])
  np.testing.assert_array_equal(np.diff(counts, 2), 0)
  assert counts[1] - counts[0] == 1
  # The hidden layers do not depend on M: only the input layer grows.
  for m in (4, 12):
    net = jax.eval_shape(construction.construct, _teacher(0, num_modules=m), K, 10)
    assert net["dense_0"]["kernel"].shape == (m + I, 2 * I * H * 10 + H)


def test_required_resolution_is_the_smallest_meeting_eps():
  teacher, eps = _teacher(3), 1e-3
  n = construction.required_resolution(teacher, K, eps)
  assert float(construction.error_bound(teacher, K, n)) <= eps
  assert float(construction.error_bound(teacher, K, n - 1)) > eps


def test_vmapped_construction_equals_solo():
  teachers = [_teacher(s) for s in range(2)]
  stacked = jax.tree.map(lambda *a: jnp.stack(a), *teachers)
  out = jax.vmap(lambda t: construction.construct(t, K, 4))(stacked)
  for s, teacher in enumerate(teachers):
    chex.assert_trees_all_close(jax.tree.map(lambda a, s=s: a[s], out),
                                construction.construct(teacher, K, 4), atol=1e-6)


def test_multilayer_teacher_raises_naming_the_field():
  teacher = _teacher(0, num_hidden_layers=2)
  with pytest.raises(ConfigError, match="num_hidden_layers"):
    construction.construct(teacher, K, 4)
  cfg = _theorem_config()
  cfg.hyperteacher.task.num_hidden_layers = 2
  with pytest.raises(ConfigError) as info:
    experiment.validate(cfg)
  assert info.value.field == "hyperteacher.task.num_hidden_layers"


@pytest.mark.parametrize("field, value", [
    ("theorem.resolutions", (8,)), ("theorem.eps", 0.0), ("theorem.num_modules", (1, 4)),
    ("theorem.grid_points", 1), ("hyperteacher.encoding.name", "orthogonal"),
    ("hyperteacher.optim.warmup_steps", 10_000), ("hyperteacher.train.num_steps", 70),
])
def test_bad_config_names_the_field(field, value):
  cfg = _theorem_config()
  section, *rest = field.split(".")
  node = cfg[section]
  for name in rest[:-1]:
    node = node[name]
  node[rest[-1]] = value
  with pytest.raises(ConfigError) as info:
    experiment.validate(cfg)
  assert info.value.field == field
