"""Transformer student: the reference's architecture (checked against an independent numpy forward
pass), causal, PAD masked, validation. RoPE and attention themselves: tests/test_lm.py."""

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from compgen_jax.students import registry as students
from compgen_jax.students import transformer
from compgen_jax.types import ConfigError
from tests.helpers import load_config

B, N, I, O, E = 3, 5, 4, 2, 6


def _cfg(**overrides):
  """A small `student.transformer` subsection."""
  cfg = students.default_config().transformer
  cfg.update(dict(num_layers=2, d_model=16, num_heads=2, ffw_dim=32))
  cfg.update(overrides)
  return cfg


def _section(name: str = "transformer", **overrides):
  """The `student` section with the small transformer subsection."""
  cfg = students.default_config()
  cfg.name = name
  cfg.transformer = _cfg(**overrides)
  return cfg


def _x(seed, shape=(B, N, I)):
  return jnp.asarray(np.random.default_rng(seed).uniform(-1, 1, shape), jnp.float32)


@pytest.fixture(scope="module")
def vector_model():
  cfg = _cfg()
  params = transformer.init(jax.random.key(0), E, I, O, cfg)
  return params, jax.jit(lambda p, phi, x: transformer.apply(p, phi, x, O, cfg))


def test_shapes_and_activation_names(vector_model):
  params, apply = vector_model
  y, acts = apply(params, _x(0, (B, E)), _x(1))
  chex.assert_shape(y, (B, N, O))
  assert list(acts) == ["block_0", "block_1", "ln_final"]
  chex.assert_shape(list(acts.values()), (B, N, 16))
  chex.assert_tree_all_finite(acts)


def _leaf_paths(params):
  return {"/".join(k.key for k in path) for path, _ in jax.tree_util.tree_leaves_with_path(params)}


def test_param_tree_and_init_match_the_reference():
  """compscale/model/transformer.py and policy.py (TransformerPolicy): LayerNorms (incl. the
  per-head q/k norms and the final one) have a scale and no bias; q, k, v, out and the feed-forward
  have no bias and Xavier-uniform kernels; proj(phi) has no bias; proj(x) and the readout have."""
  D, F = 64, 96
  cfg = _cfg(num_layers=2, d_model=D, ffw_dim=F)
  params = transformer.init(jax.random.key(0), E, I, O, cfg)
  block = {"ln_attn/scale", "query/kernel", "key/kernel", "value/kernel", "ln_query/scale",
           "ln_key/scale", "out/kernel", "ln_ffw/scale", "ffw_in/kernel", "ffw_out/kernel"}
  want = ({"enc_proj/kernel", "x_proj/kernel", "x_proj/bias", "ln_final/scale",
           "readout/kernel", "readout/bias"}
          | {f"block_{i}/{leaf}" for i in range(2) for leaf in block})
  assert _leaf_paths(params) == want
  # The q/k norms act on the head dimension, one scale shared by the heads.
  chex.assert_shape([params["block_0"]["ln_query"]["scale"], params["block_0"]["ln_key"]["scale"]],
                    (D // 2,))
  # Xavier uniform: U(-a, a) with a = sqrt(6 / (fan_in + fan_out)) over the flattened matrix.
  fans = (("query", D, D), ("out", D, D), ("ffw_in", D, F), ("ffw_out", F, D))
  for name, fan_in, fan_out in fans:
    w = np.asarray(params["block_0"][name]["kernel"])
    bound = np.sqrt(6.0 / (fan_in + fan_out))
    assert bound * 0.97 < np.abs(w).max() <= bound, name
    np.testing.assert_allclose(w.std(), bound / np.sqrt(3.0), rtol=0.05)


def _np_layernorm(x, scale):
  """flax LayerNorm without bias (epsilon 1e-6) over the last axis."""
  centred = x - x.mean(-1, keepdims=True)
  return centred / np.sqrt((centred**2).mean(-1, keepdims=True) + 1e-6) * scale


def _np_rope(x_TxHxK, base):
  """The reference's rotary.py: sin/cos of pos / base^(2j/K) tiled twice, x cos + rot(x) sin."""
  T, _, K = x_TxHxK.shape
  angle_TxK = np.arange(T)[:, None] / base ** (np.arange(0, K, 2) / K)[None, :]
  angle_Tx1xK = np.concatenate([angle_TxK, angle_TxK], -1)[:, None, :]
  x1, x2 = np.split(x_TxHxK, 2, axis=-1)
  return x_TxHxK * np.cos(angle_Tx1xK) + np.concatenate([-x2, x1], -1) * np.sin(angle_Tx1xK)


def _np_gelu(x):
  return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def _np_forward(p, phi_E, x_NxI, num_layers, base):
  """One task through the reference's TransformerPolicy in float64: (y [N, O], final LN [N, D])."""
  h = np.concatenate([(phi_E @ p["enc_proj"]["kernel"])[None],
                      x_NxI @ p["x_proj"]["kernel"] + p["x_proj"]["bias"]])
  T = h.shape[0]
  causal_TxT = np.tril(np.ones((T, T), bool))
  for i in range(num_layers):
    b = p[f"block_{i}"]
    a = _np_layernorm(h, b["ln_attn"]["scale"])
    q, k, v = (np.einsum("td,dhk->thk", a, b[n]["kernel"]) for n in ("query", "key", "value"))
    q = _np_rope(_np_layernorm(q, b["ln_query"]["scale"]), base)
    k = _np_rope(_np_layernorm(k, b["ln_key"]["scale"]), base)
    s = np.einsum("qhk,thk->hqt", q, k) / np.sqrt(q.shape[-1])
    s = np.where(causal_TxT[None], s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    h = h + np.einsum("qhk,hkd->qd", np.einsum("hqt,thk->qhk", w, v), b["out"]["kernel"])
    f = _np_layernorm(h, b["ln_ffw"]["scale"]) @ b["ffw_in"]["kernel"]
    h = h + _np_gelu(f) @ b["ffw_out"]["kernel"]
  out = _np_layernorm(h[1:], p["ln_final"]["scale"])
  return out @ p["readout"]["kernel"] + p["readout"]["bias"], out


def test_forward_equals_an_independent_numpy_forward(vector_model):
  params, apply = vector_model
  # Perturb every leaf so the LayerNorm scales and biases are not 1 / 0 as at init.
  rng = np.random.default_rng(7)
  params = jax.tree.map(
      lambda a: a + jnp.asarray(0.3 * rng.normal(size=a.shape), a.dtype), params)
  phi, x = _x(0, (B, E)), _x(1)
  y, acts = apply(params, phi, x)
  p64 = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
  for b in range(B):
    want_y, want_out = _np_forward(p64, np.asarray(phi[b], np.float64),
                                   np.asarray(x[b], np.float64), 2, 10_000.0)
    np.testing.assert_allclose(np.asarray(y[b]), want_y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(acts["ln_final"][b]), want_out, rtol=1e-4, atol=1e-4)


def test_causal(vector_model):
  params, apply = vector_model
  phi, x = _x(0, (B, E)), _x(1)
  j = 2
  x_changed = x.at[:, j].set(_x(2, (B, I)))
  (y, acts), (y2, acts2) = apply(params, phi, x), apply(params, phi, x_changed)
  # Positions before j never see x_j ...
  chex.assert_trees_all_close(y2[:, :j], y[:, :j], atol=1e-6)
  chex.assert_trees_all_close(acts2["block_0"][:, :j], acts["block_0"][:, :j], atol=1e-6)
  # ... while j and later do.
  assert np.all(np.abs(np.asarray(y2[:, j:] - y[:, j:])).max(axis=(0, 2)) > 1e-4)
  # And every position sees the task encoding.
  y3, _ = apply(params, phi + 1.0, x)
  assert np.all(np.abs(np.asarray(y3 - y)).max(axis=(0, 2)) > 1e-4)


def test_token_input_masks_pad():
  cfg, V, L = _cfg(), 9, 4
  params = transformer.init(jax.random.key(1), L, I, O, cfg, vocab_size=V)
  assert params["enc_embed"]["embedding"].shape == (V, 16)
  apply = jax.jit(lambda p, t, x: transformer.apply(p, t, x, O, cfg))
  tokens = jnp.array([[3, 5, 0, 0], [1, 8, 2, 6], [4, 7, 0, 0]], jnp.float32)
  x = _x(3)
  y, _ = apply(params, tokens, x)
  chex.assert_shape(y, (B, N, O))
  # Changing the PAD embedding changes nothing: PAD keys are masked.
  moved = jax.tree.map(lambda a: a, params)
  moved["enc_embed"]["embedding"] = params["enc_embed"]["embedding"].at[0].add(3.0)
  y_moved, _ = apply(moved, tokens, x)
  chex.assert_trees_all_close(y_moved, y, atol=1e-5)
  # A real token matters.
  y_other, _ = apply(params, tokens.at[0, 1].set(6.0), x)
  assert float(jnp.abs(y_other[0] - y[0]).max()) > 1e-4


@pytest.mark.parametrize("overrides, field", [
    (dict(d_model=18, num_heads=4), "student.transformer.d_model"),  # not a multiple
    (dict(d_model=12, num_heads=4), "student.transformer.d_model"),  # head dim 3 is odd
    (dict(num_layers=0), "student.transformer.num_layers"),
    (dict(rope_base=0.0), "student.transformer.rope_base"),
    (dict(name="rnn"), "student.name"),
])
def test_validation_names_the_field(overrides, field):
  students.validate(_section())
  with pytest.raises(ConfigError) as err:
    students.validate(_section(**overrides))
  assert err.value.field == field


def test_default_config_is_valid_for_every_student():
  for name in students.REGISTRY:
    cfg = students.default_config()
    cfg.name = name
    students.validate(cfg)


def test_paper_preset_students_match_the_reference_config():
  """The reference's configs/teacher.py model section: d_mlp 1024 x 4 hidden layers; d_model 256,
  4 heads, 4 layers, d_ffw 1024; the hypernetwork's generated MLP is d_ffw = 1024 wide
  (policy.py HypernetworkPolicy) behind a LayerNorm; RoPE max_timescale 10000 (rotary.py)."""
  student = load_config("hyperteacher", "paper").student
  want = {"mlp": dict(width=1024, depth=4, widths=()),
          "transformer": dict(num_layers=4, d_model=256, num_heads=4, ffw_dim=1024,
                              rope_base=10_000.0),
          "hypernetwork": dict(hidden=1024, layernorm=True)}
  assert student.name == "mlp" and set(student) == {"name", *want}
  assert {name: student[name].to_dict() for name in want} == want


def test_each_student_reads_only_its_subsection():
  """init and apply see student.<name> alone: a section without the other students'
  subsections gives the same parameters and predictions."""
  x = _x(3)
  phi = jnp.asarray(np.random.default_rng(4).normal(size=(B, E)), jnp.float32)
  for name in students.REGISTRY:
    full = load_config("hyperteacher", "tiny", **{"student.name": name}).student
    alone = ml_collections.ConfigDict({"name": name, name: full[name].to_dict()})
    outs = []
    for cfg in (full, alone):
      params = students.init_params(cfg, jax.random.key(0), E, I, O)
      outs.append((params, students.apply_student(cfg, params, phi, x, O)[0]))
    chex.assert_trees_all_equal(*outs)
