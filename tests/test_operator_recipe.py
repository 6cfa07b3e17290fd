"""docs/architecture.md's recipe "An operator", followed on a toy and nothing more: an `Operator`
entry in `compose.OPERATORS` (compgen_jax/composition/compose.py) and its numpy formula in
`NUMPY` (tests/test_composition_operators.py), both monkeypatched. The config then takes the
name, and compose, the tail boost and generate() use it as numpy computes it."""

import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from compgen_jax.composition import compose
from compgen_jax.composition import spec as spec_lib
from compgen_jax.letters import config as letters_config
from compgen_jax.llm_eval import runner
from tests import helpers
from tests import test_composition_operators as operators_test


def _experts_only(logp_b_xV, logp_e_Kx_xV, lam_K):
  """A toy: the experts' weighted product without the background, sum_i lam_i log p_i."""
  return jnp.einsum("k,k...->...", lam_K, compose.clamp_logp(logp_e_Kx_xV))


def _experts_only_boost(logp_b_xV, logp_e_Kx_xV, lam_K):
  return _experts_only(logp_b_xV, logp_e_Kx_xV, lam_K) - logp_b_xV


def _experts_only_numpy(lb, le, lam):
  return sum(w * np.maximum(e, -1e4) for w, e in zip(lam, le, strict=True))


@pytest.fixture
def toy(monkeypatch):
  monkeypatch.setitem(compose.OPERATORS, "experts_only",
                      compose.Operator(_experts_only, _experts_only_boost, weighted=True))
  monkeypatch.setitem(operators_test.NUMPY, "experts_only", _experts_only_numpy)
  return "experts_only"


def test_the_config_takes_the_new_name(toy):
  """compose.operator=<name> in a spec section, the letters' config and the LLMs'."""
  spec_lib.validate(ml_collections.ConfigDict(spec_lib.spec_fields(operator=toy)))
  letters_config.validate(helpers.load_config("letters", "tiny", **{"compose.operator": toy}))
  cfg = helpers.llm_config()
  with cfg.unlocked():
    cfg.compose.operator = toy
  runner.validate(cfg)


def test_the_new_operator_is_its_formula(toy):
  operators_test.test_numpy_has_a_formula_for_every_operator()
  operators_test.check_formula(toy)


def test_generate_decodes_with_the_new_operator(toy):
  operators_test.check_generate(toy, helpers.tiny_gemma_params(4))
