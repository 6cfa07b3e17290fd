"""The logit-composition operator: log p_b + sum_i lambda_i (log p_i - log p_b), renormalised."""

import jax
import jax.numpy as jnp

from compgen_jax.types import Array

# Log-probs are clamped here before they are combined, as the authors clamp log p_b at -1e4: a
# token with probability exactly 0 would otherwise give -inf - (-inf) (or 0 * -inf for a weight
# of 0) = NaN. exp(-1e4) is 0 in float32 and float64, so clamped tokens keep probability 0.
LOGP_FLOOR = -1e4


def clamp_logp(logp_xV: Array) -> Array:
  """max(log p, LOGP_FLOOR): finite log-probs for tokens of probability 0."""
  return jnp.maximum(logp_xV, LOGP_FLOOR)


def compose(logp_b_xV: Array, logp_e_Kx_xV: Array, lam_K: Array | None = None,
            temperature: float | Array = 1.0, *, authors: bool = False) -> tuple[Array, Array]:
  """Composes a background with K experts (log-probabilities over the last axis).

  logp_b_xV: [..., V]; logp_e_Kx_xV: [K, ..., V] (K may be 0); lam_K: weights (default ones).
  Returns (composed log-probs at `temperature`, log Z_t of the untempered product), where
  Z_t = sum_v p_b(v) prod_i (p_i(v) / p_b(v))^lambda_i; log Z_t = 0 under exact factorization.
  Every log-prob is clamped at LOGP_FLOOR first (a token the background rules out but the
  experts allow gets a large boost, the limit of p_i / p_b as p_b -> 0).

  authors=True is the authors' LLM operator (`merged_gen` in their supplement notebook,
  Selective_Composition_Code.ipynb): sum_i log p_i - max(log p_b, LOGP_FLOOR), the experts
  summed against one background term, all weights 1 (lam_K must be None). It equals the paper's
  operator for K = 2 only; only the background is clamped, as there, so a token an expert rules
  out keeps probability 0.
  """
  if authors:
    if lam_K is not None:
      raise ValueError("the authors' variant has all weights 1: lam_K must be None")
    unnorm_xV = jnp.sum(logp_e_Kx_xV, axis=0) - clamp_logp(logp_b_xV)
    return (jax.nn.log_softmax(unnorm_xV / temperature, axis=-1),
            jax.nn.logsumexp(unnorm_xV, axis=-1))
  num_experts = logp_e_Kx_xV.shape[0]
  lam_K = jnp.ones((num_experts,), logp_b_xV.dtype) if lam_K is None else jnp.asarray(lam_K)
  logp_b_xV, logp_e_Kx_xV = clamp_logp(logp_b_xV), clamp_logp(logp_e_Kx_xV)
  diff_Kx_xV = logp_e_Kx_xV - logp_b_xV[None]
  unnorm_xV = logp_b_xV + jnp.einsum("k,k...->...", lam_K.astype(diff_Kx_xV.dtype), diff_Kx_xV)
  log_z = jax.nn.logsumexp(unnorm_xV, axis=-1)
  return jax.nn.log_softmax(unnorm_xV / temperature, axis=-1), log_z


def compose_logits(logits_b_xV: Array, logits_e_Kx_xV: Array, lam_K: Array | None = None,
                   temperature: float | Array = 1.0, *, authors: bool = False
                   ) -> tuple[Array, Array]:
  """`compose` on raw logits: each model is log-softmaxed first."""
  return compose(jax.nn.log_softmax(logits_b_xV, axis=-1),
                 jax.nn.log_softmax(logits_e_Kx_xV, axis=-1), lam_K, temperature,
                 authors=authors)
