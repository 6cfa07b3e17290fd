"""Models of one architecture as one vmapped forward over stacked params (composition/stacked.py):
which models group, and the same logits, caches and generated tokens as one forward per model."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax.composition import generate as gen_lib
from compgen_jax.composition import speculative, stacked
from compgen_jax.composition.spec import Spec, Truncation
from compgen_jax.lm import gemma2
from compgen_jax.lm.model import uniform_model
from tests import helpers

jax.config.update("jax_numpy_rank_promotion", "raise")

CFG = helpers.TINY_GEMMA
MODEL = gemma2.make_model(CFG)
OTHER = gemma2.make_model(CFG)  # the same architecture, another Model object: never grouped
N = 10


@pytest.fixture(scope="module")
def params():
  return helpers.tiny_gemma_params(4)


_prompts = helpers.tiny_gemma_prompts


def test_plan_groups_models_sharing_an_apply_and_shapes(params):
  caches = [MODEL.init_cache(2, 8)] * 4
  assert stacked.plan([MODEL] * 4, params, caches) == ((0, 1, 2, 3),)
  assert stacked.plan([MODEL] * 4, params, caches, enabled=False) == ((0,), (1,), (2,), (3,))
  assert stacked.plan([MODEL, OTHER, MODEL, MODEL], params, caches) == ((0, 2, 3), (1,))
  longer = caches[:3] + [MODEL.init_cache(2, 9)]  # another cache length: shapes differ
  assert stacked.plan([MODEL] * 4, params, longer) == ((0, 1, 2), (3,))
  half = jax.tree.map(lambda x: x.astype(jnp.bfloat16), params[1])  # another dtype
  assert stacked.plan([MODEL] * 3, (params[0], half, params[2]), caches[:3]) == ((0, 2), (1,))
  flat = uniform_model(MODEL)  # no arrays to stack: runs alone
  assert stacked.plan([flat, flat], [None, None], [(), ()]) == ((0,), (1,))


def test_stacked_apply_equals_one_forward_per_model(params):
  """Prefill then two one-token steps: logits and caches of the vmapped forward equal each
  model's own."""
  prompts, valid = _prompts()
  models = [MODEL, OTHER, MODEL, MODEL]
  caches = [m.init_cache(3, 12) for m in models]
  groups = stacked.plan(models, params, caches)
  assert groups == ((0, 2, 3), (1,))
  group_params = stacked.stack(groups, params)
  group_caches = stacked.stack(groups, caches, caches=True)
  step = jax.jit(lambda gp, toks, gc, v: stacked.apply(groups, models, gp, toks, gc, v))
  one = jax.jit(lambda p, toks, c, v: MODEL.apply(p, toks, c, v))
  for toks, v in [(prompts, valid), (prompts[:, -1:], valid[:, -1:]),
                  (prompts[:, :1], jnp.asarray([[True], [False], [True]]))]:
    logits, group_caches = step(group_params, toks, group_caches, v)
    outs = [one(p, toks, c, v) for p, c in zip(params, caches, strict=True)]
    caches = [c for _, c in outs]
    for got, (want, _) in zip(logits, outs, strict=True):
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  # the group's caches are the members' caches, stacked in model order (the position
  # counter, a scalar, shared)
  for j, i in enumerate(groups[0]):
    jax.tree.map(lambda s, c, j=j: np.testing.assert_allclose(
        s[j] if s.ndim > c.ndim else s, c, rtol=1e-5, atol=1e-5), group_caches[0], caches[i])
  assert group_caches[0]["index"].shape == ()


@pytest.mark.parametrize("spec", [Spec(), Spec(operator="authors", gate="kl", gate_tau=0.05,
                                               mask="top_p", mask_p=0.9, eos="min")])
def test_generate_stacked_gives_the_same_tokens_and_diagnostics(params, spec):
  prompts, valid = _prompts()
  models = (MODEL, MODEL, OTHER, MODEL)
  kw = dict(stop_at_eos=True, prefill_chunk=4, spec=spec, kl_threshold=0.05)
  budgets = np.array([N, 7, N])
  per_model, together = (gen_lib.generate(models, params, prompts, valid, budgets,
                                          stack_models=flag, **kw) for flag in (False, True))
  np.testing.assert_array_equal(together.tokens_BxN, per_model.tokens_BxN)
  np.testing.assert_array_equal(together.lengths_B, per_model.lengths_B)
  np.testing.assert_array_equal(together.reason_B, per_model.reason_B)
  for field in ("log_z_BxN", "p_eos_BxN", "p_eos_BxNxM", "kl_BxNxK"):
    np.testing.assert_allclose(getattr(together, field), getattr(per_model, field),
                               rtol=1e-4, atol=1e-5)
  assert int(per_model.lengths_B.sum()) > 3 and len(set(per_model.tokens_BxN[0].tolist())) > 1


def test_generate_stacked_samples_the_same_tokens(params):
  """Sampling (temperature, top-k, a key per row) draws the same tokens either way; one model
  prompted differently (another prompt length: another cache shape) runs alone."""
  prompts, valid = _prompts()
  short, short_valid = prompts[:, 2:], valid[:, 2:]
  kw = dict(greedy=False, key=jax.random.key(3), temperature=1.3,
            trunc=Truncation(top_k=8), prefill_chunk=4)
  per_model, together = (gen_lib.generate(
      (MODEL,) * 3, params[:3], (prompts, prompts, short), (valid, valid, short_valid),
      np.full(3, N), stack_models=flag, **kw) for flag in (False, True))
  np.testing.assert_array_equal(together.tokens_BxN, per_model.tokens_BxN)
  np.testing.assert_allclose(together.log_z_BxN, per_model.log_z_BxN, rtol=1e-4, atol=1e-5)


def test_speculative_stacked_gives_the_same_tokens(params):
  """The experts scoring drafts and appending blocks as one vmapped forward: the tokens of
  plain composed greedy decoding."""
  prompts, valid = _prompts()
  budgets = np.full(3, N)
  plain = gen_lib.generate((MODEL,) * 4, params, prompts, valid, budgets, prefill_chunk=4)
  fast = speculative.generate_speculative((MODEL,) * 4, params, prompts, valid, budgets,
                                          draft_len=3, prefill_chunk=4, stack_models=True)
  np.testing.assert_array_equal(fast.gen.tokens_BxN, plain.tokens_BxN)
  np.testing.assert_array_equal(fast.gen.lengths_B, plain.lengths_B)
  np.testing.assert_allclose(fast.gen.kl_BxNxK, plain.kl_BxNxK, rtol=1e-4, atol=1e-5)
