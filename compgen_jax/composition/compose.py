"""The composition operators, a table from a name to its functions: the paper's log p_b +
sum_i lambda_i (log p_i - log p_b) and the authors' notebook variant, renormalised by `compose`.
A new operator is one function and one `OPERATORS` entry here (docs/architecture.md)."""

from collections.abc import Callable
from typing import NamedTuple

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


class Operator(NamedTuple):
  """`logits(logp_b_xV, logp_e_Kx_xV, lam_K)`: the unnormalised composed log-probs [x, V] of a
  background and K experts (lam_K [K], None when `weighted` is False: all weights 1). `boost`,
  on the same arguments clamped: the composed logit minus log p_b (`diagnostics.tail_risk`)."""
  logits: Callable[[Array, Array, Array | None], Array]
  boost: Callable[[Array, Array, Array | None], Array]
  weighted: bool


def paper(logp_b_xV: Array, logp_e_Kx_xV: Array, lam_K: Array) -> Array:
  """log p_b + sum_i lam_i (log p_i - log p_b), every log-prob clamped (a token the
  background rules out but the experts allow gets a large boost, the limit of p_i / p_b)."""
  logp_b_xV = clamp_logp(logp_b_xV)
  return logp_b_xV + paper_boost(logp_b_xV, clamp_logp(logp_e_Kx_xV), lam_K)


def paper_boost(logp_b_xV: Array, logp_e_Kx_xV: Array, lam_K: Array) -> Array:
  diff_Kx_xV = logp_e_Kx_xV - logp_b_xV[None]
  return jnp.einsum("k,k...->...", lam_K.astype(diff_Kx_xV.dtype), diff_Kx_xV)


def authors(logp_b_xV: Array, logp_e_Kx_xV: Array, lam_K: None = None) -> Array:
  """The authors' LLM operator (`merged_gen` in their supplement notebook,
  Selective_Composition_Code.ipynb): sum_i log p_i - max(log p_b, LOGP_FLOOR), the experts
  summed against one background term, all weights 1. It equals the paper's operator for K = 2
  only; only the background is clamped, as there, so a token an expert rules out keeps
  probability 0."""
  return jnp.sum(logp_e_Kx_xV, axis=0) - clamp_logp(logp_b_xV)


def authors_boost(logp_b_xV: Array, logp_e_Kx_xV: Array, lam_K: None = None) -> Array:
  return jnp.sum(logp_e_Kx_xV, axis=0) - 2.0 * logp_b_xV


OPERATORS = {
    "paper": Operator(paper, paper_boost, weighted=True),
    "authors": Operator(authors, authors_boost, weighted=False),
}


def lookup(name: str) -> Operator:
  """The operator called `name`; ValueError naming the known ones for another."""
  if name not in OPERATORS:
    raise ValueError(f"unknown composition operator {name!r}; known: {', '.join(OPERATORS)}")
  return OPERATORS[name]


def weights(name: str, lam_K, num_experts: int) -> Array | None:
  """The weights operator `name` composes with: lam_K, or 1 for every expert when None; None
  for an operator without weights (ValueError when given some)."""
  if not lookup(name).weighted:
    if lam_K is not None:
      raise ValueError(f"the {name!r} operator has all weights 1: lam_K must be None")
    return None
  return jnp.ones((num_experts,), jnp.float32) if lam_K is None else jnp.asarray(lam_K)


def compose(logp_b_xV: Array, logp_e_Kx_xV: Array, lam_K: Array | None = None,
            temperature: float | Array = 1.0, *, operator: str = "paper") -> tuple[Array, Array]:
  """Composes a background with K experts (log-probabilities over the last axis).

  logp_b_xV: [..., V]; logp_e_Kx_xV: [K, ..., V] (K may be 0); lam_K: weights (`weights`).
  Returns (composed log-probs at `temperature`, log Z_t of the untempered product), where for
  the paper's operator Z_t = sum_v p_b(v) prod_i (p_i(v) / p_b(v))^lambda_i; log Z_t = 0 under
  exact factorization.
  """
  lam_K = weights(operator, lam_K, logp_e_Kx_xV.shape[0])
  unnorm_xV = OPERATORS[operator].logits(logp_b_xV, logp_e_Kx_xV, lam_K)
  log_z = jax.nn.logsumexp(unnorm_xV, axis=-1)
  return jax.nn.log_softmax(unnorm_xV / temperature, axis=-1), log_z


def compose_logits(logits_b_xV: Array, logits_e_Kx_xV: Array, lam_K: Array | None = None,
                   temperature: float | Array = 1.0, *, operator: str = "paper"
                   ) -> tuple[Array, Array]:
  """`compose` on raw logits: each model is log-softmaxed first."""
  return compose(jax.nn.log_softmax(logits_b_xV, axis=-1),
                 jax.nn.log_softmax(logits_e_Kx_xV, axis=-1), lam_K, temperature,
                 operator=operator)
