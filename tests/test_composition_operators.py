"""The operator table (`compose.OPERATORS`): each operator equals its formula computed in numpy
float64 (`NUMPY`, written from the formulas, not from the jax code), its tail boost is the
composed logit minus log p_b, generate() decodes with each as numpy composes the models'
teacher-forced log-probs, and an unknown name is a one-line error before anything compiles.
A new operator adds its formula to NUMPY (docs/architecture.md, "An operator")."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from scipy.special import logsumexp

from compgen_jax.composition import compose, decode, diagnostics, speculative
from compgen_jax.composition import generate as gen_lib
from compgen_jax.composition import spec as spec_lib
from compgen_jax.lm import gemma2
from compgen_jax.types import ConfigError
from tests import helpers

jax.config.update("jax_numpy_rank_promotion", "raise")

FLOOR = -1e4  # the clamp of log-probs, as the authors clamp log p_b


def _paper(lb, le, lam):
  """log of p_b prod_i (p_i / p_b)^lam_i, every log-prob clamped at -1e4."""
  lb, le = np.maximum(lb, FLOOR), np.maximum(le, FLOOR)
  return lb + sum(w * (e - lb) for w, e in zip(lam, le, strict=True))


def _authors(lb, le, lam):
  """Their notebook's merged_gen: sum_i log p_i - max(log p_b, -1e4) (no weights)."""
  assert lam is None
  return le.sum(0) - np.maximum(lb, FLOOR)


NUMPY = {"paper": _paper, "authors": _authors}  # name -> unnormalised composed log-probs
MODEL = gemma2.make_model(helpers.TINY_GEMMA)
N = 8


def _weights(name: str, num_experts: int) -> list:
  """The weights each operator is checked at: none (its default), and signed ones if it has
  weights."""
  if not compose.OPERATORS[name].weighted:
    return [None]
  return [None, np.asarray([0.7, -0.4, 1.5][:num_experts], np.float32)]


def _logps(seed: int, shape) -> np.ndarray:
  """Random float32 log-probs with some tokens of probability exactly 0."""
  rng = np.random.default_rng(seed)
  logits = rng.normal(scale=3.0, size=shape)
  logits[rng.random(shape) < 0.05] = -np.inf
  logits[..., 0] = 0.0  # every row keeps a token
  return np.asarray(logits - logsumexp(logits, axis=-1, keepdims=True), np.float32)


def _numpy_weights(name: str, lam, num_experts: int) -> list | None:
  """The weights NUMPY[name] takes: None without weights, else lam or 1 per expert."""
  if not compose.OPERATORS[name].weighted:
    return None
  return [1.0] * num_experts if lam is None else lam.astype(np.float64).tolist()


def check_formula(name: str) -> None:
  """compose.compose and the tail boost of operator `name` against NUMPY[name] in float64."""
  lb, le = _logps(0, (4, 5, 13)), _logps(1, (3, 4, 5, 13))
  for lam in _weights(name, 3):
    w = _numpy_weights(name, lam, 3)
    ref = NUMPY[name](lb.astype(np.float64), le.astype(np.float64), w)
    got, log_z = compose.compose(jnp.asarray(lb), jnp.asarray(le), lam, 0.7, operator=name)
    np.testing.assert_allclose(log_z, logsumexp(ref, axis=-1), rtol=1e-5, atol=1e-4)
    want = ref / 0.7 - logsumexp(ref / 0.7, axis=-1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)
    # the boost: the composed logit minus log p_b, on clamped log-probs, max over the tail
    lb_c, le_c = (np.maximum(x, FLOOR).astype(np.float64) for x in (lb, le))
    boost = np.where(lb_c < -2.0, NUMPY[name](lb_c, le_c, w) - lb_c, -np.inf).max(-1)
    risk = diagnostics.tail_risk(jnp.asarray(lb), jnp.asarray(le), got, lam, -2.0,
                                 operator=name)
    np.testing.assert_allclose(risk["tail_boost_BxT"], np.where(np.isinf(boost), 0.0, boost),
                               rtol=1e-5, atol=1e-3)


def check_generate(name: str, params) -> None:
  """Greedy generate() under operator `name` picks, at every step, the argmax of NUMPY[name]
  on the models' teacher-forced log-probs, and records its log Z."""
  prompts, valid = helpers.tiny_gemma_prompts()
  models = (MODEL,) * len(params)
  p = prompts.shape[1]
  for lam in _weights(name, len(params) - 1):
    g = gen_lib.generate(models, params, prompts, valid, np.full((3,), N), lam_K=lam,
                         prefill_chunk=4, spec=spec_lib.Spec(operator=name))
    gen_BxN = np.arange(N)[None] < np.asarray(g.lengths_B)[:, None]
    seq = jnp.concatenate([prompts, g.tokens_BxN], 1)
    logp = decode.teacher_forced_logps(models, params, seq,
                                       jnp.concatenate([valid, jnp.asarray(gen_BxN)], 1))
    logp = np.asarray(logp, np.float64)[:, :, p - 1:p - 1 + N]  # what each token came from
    ref = NUMPY[name](logp[0], logp[1:], _numpy_weights(name, lam, len(params) - 1))
    top2 = np.sort(ref, axis=-1)[..., -2:]
    decided = gen_BxN & (top2[..., 1] - top2[..., 0] > 1e-3)  # no near-tie left to rounding
    assert decided.sum() >= 0.9 * gen_BxN.sum()
    np.testing.assert_array_equal(np.asarray(g.tokens_BxN)[decided], ref.argmax(-1)[decided])
    np.testing.assert_allclose(np.asarray(g.log_z_BxN)[gen_BxN],
                               logsumexp(ref, axis=-1)[gen_BxN], rtol=1e-4, atol=1e-3)


@pytest.fixture(scope="module")
def params():
  return helpers.tiny_gemma_params(4)  # three experts: the operators differ (equal at K = 2)


def test_numpy_has_a_formula_for_every_operator():
  assert set(NUMPY) == set(compose.OPERATORS)


@pytest.mark.parametrize("name", list(compose.OPERATORS))
def test_operator_is_its_formula(name):
  check_formula(name)


@pytest.mark.parametrize("name", list(compose.OPERATORS))
def test_generate_decodes_with_the_operator(name, params):
  check_generate(name, params)


def test_one_lambda_default():
  """Weights 1 per expert when none are given; none for an operator without weights."""
  np.testing.assert_array_equal(compose.weights("paper", None, 3), np.ones(3, np.float32))
  assert compose.weights("authors", None, 3) is None
  with pytest.raises(ValueError, match="'authors' operator has all weights 1"):
    compose.weights("authors", [1.0, 1.0], 2)


def test_an_unknown_operator_is_a_one_line_error_before_anything_compiles(params, monkeypatch):
  known = ", ".join(compose.OPERATORS)
  section = ml_collections.ConfigDict(spec_lib.spec_fields(operator="nope"))
  with pytest.raises(ConfigError, match=f"'compose.operator': unknown 'nope'; allowed: {known}$"):
    spec_lib.validate(section)

  def compiled(*args, **kwargs):
    raise AssertionError("compiled before the operator was checked")
  monkeypatch.setattr(gen_lib, "_generate", compiled)
  monkeypatch.setattr(speculative, "_speculate", compiled)
  prompts, valid = helpers.tiny_gemma_prompts()
  bad = spec_lib.Spec(operator="nope")
  message = f"^unknown composition operator 'nope'; known: {known}$"
  for run in (gen_lib.generate, speculative.generate_speculative):
    with pytest.raises(ValueError, match=message):
      run((MODEL,) * 4, params, prompts, valid, np.full((3,), N), spec=bad)
  with pytest.raises(ValueError, match=message):
    compose.compose(jnp.zeros((2, 5)), jnp.zeros((1, 2, 5)), operator="nope")
  with pytest.raises(ValueError, match=message):
    decode.decode((MODEL,) * 4, params, prompts, valid, spec=bad)
