"""One decoding step of a composition under a `spec.Spec`: selective gating, the operator
(`compose.compose`, by its name in `compose.OPERATORS`), the plausibility mask and the EOS
rule, in that order. The default spec is `compose.compose` alone, the same arrays bit for bit.

Shapes: M models (background first), K = M - 1 experts, x any batch dims, V vocabulary.
"""

import jax
import jax.numpy as jnp

from compgen_jax.composition.compose import clamp_logp, compose
from compgen_jax.composition.spec import Spec
from compgen_jax.types import Array


def kl_to_background(logp_MxxV: Array) -> Array:
  """KL(p_i || p_b) per expert [K, x] (as `diagnostics.kl`: clamped log-probs)."""
  logp_e, logp_b = clamp_logp(logp_MxxV[1:]), clamp_logp(logp_MxxV[:1])
  return jnp.sum(jnp.exp(logp_e) * (logp_e - logp_b), axis=-1)


def gate(logp_MxxV: Array, spec: Spec) -> Array:
  """Which experts apply [K, x]: all, those with KL(p_i || p_b) > tau, or only the one of
  largest KL (where it exceeds tau)."""
  kl_Kxx = kl_to_background(logp_MxxV)
  if spec.gate == "none":
    return jnp.ones(kl_Kxx.shape, bool)
  active_Kxx = kl_Kxx > spec.gate_tau
  if spec.gate == "top1":
    top_Kxx = jnp.arange(kl_Kxx.shape[0]).reshape((-1,) + (1,) * (kl_Kxx.ndim - 1)) \
        == jnp.argmax(kl_Kxx, axis=0)[None]
    active_Kxx &= top_Kxx
  return active_Kxx


def plausible(logp_b_xV: Array, spec: Spec) -> Array:
  """Tokens the mask admits [x, V]: the background's nucleus (the fewest top tokens holding
  mass mask_p: a token is in when the mass ranked above it is below mask_p; ties at the edge
  all in) or p_b >= mask_alpha * max p_b. Both always admit the background's argmax."""
  if spec.mask == "alpha":
    return logp_b_xV >= jnp.max(logp_b_xV, axis=-1, keepdims=True) + jnp.log(spec.mask_alpha)
  return nucleus(logp_b_xV, spec.mask_p)


def nucleus(logp_xV: Array, p: float) -> Array:
  """[x, V]: tokens whose higher-ranked mass is below p (top-p: at least the argmax)."""
  sorted_xV = jnp.flip(jnp.sort(logp_xV, axis=-1), axis=-1)
  probs_xV = jnp.exp(sorted_xV - jax.nn.logsumexp(sorted_xV, axis=-1, keepdims=True))
  above_xV = jnp.cumsum(probs_xV, axis=-1) - probs_xV
  # the smallest kept value; every token at least as likely is kept
  cut_x1 = jnp.min(jnp.where(above_xV < p, sorted_xV, jnp.inf), axis=-1, keepdims=True)
  return logp_xV >= cut_x1


def eos_rule(logp_xV: Array, logp_MxxV: Array, spec: Spec, eos_id: int,
             lam_K: Array | None = None) -> Array:
  """Sets p(EOS) to the rule's q and rescales the other tokens to 1 - q. The vote and the
  minimum read the models the operator uses: the background and every expert of nonzero
  weight (all of them without weights), so an expert slot padded at weight 0 changes nothing."""
  logp_eos_Mxx = logp_MxxV[..., eos_id]
  used_M = jnp.ones((logp_MxxV.shape[0],), bool)
  if lam_K is not None:
    used_M = used_M.at[1:].set(jnp.asarray(lam_K) != 0)
  used_Mxx = used_M.reshape((-1,) + (1,) * (logp_eos_Mxx.ndim - 1))
  if spec.eos == "background":
    log_q = logp_eos_Mxx[0]
  elif spec.eos == "min":
    log_q = jnp.min(jnp.where(used_Mxx, logp_eos_Mxx, jnp.inf), axis=0)
  else:  # vote: EOS when most of the models used rank it first
    votes = jnp.sum((jnp.argmax(logp_MxxV, axis=-1) == eos_id) & used_Mxx, axis=0)
    log_q = jnp.where(2 * votes > jnp.sum(used_M), 0.0, -jnp.inf)
  is_eos_V = jnp.arange(logp_xV.shape[-1]) == eos_id
  rest_xV = jnp.where(is_eos_V, -jnp.inf, logp_xV)
  # log(1 - q) as log1p(-q); the rest renormalised over themselves (finite: V > 1, clamped)
  log_rest = jnp.log1p(-jnp.exp(log_q))
  lse_x1 = jax.nn.logsumexp(rest_xV, axis=-1, keepdims=True)
  lse_x1 = jnp.where(jnp.isfinite(lse_x1), lse_x1, 0.0)  # a mask that admits only EOS
  rest_xV = rest_xV - lse_x1 + log_rest[..., None]
  return jnp.where(is_eos_V, log_q[..., None], rest_xV)


def step(logp_MxxV: Array, lam_K: Array | None, spec: Spec, eos_id: int
         ) -> tuple[Array, Array]:
  """(composed log-probs [x, V], log Z_t [x] of the operator before mask and EOS rule)."""
  logp_b_xV, logp_e_KxxV = logp_MxxV[0], logp_MxxV[1:]
  if spec.gate != "none" and logp_e_KxxV.shape[0]:
    # an expert gated off is replaced by the background: its term vanishes
    logp_e_KxxV = jnp.where(gate(logp_MxxV, spec)[..., None], logp_e_KxxV, logp_b_xV[None])
  logp_xV, log_z_x = compose(logp_b_xV, logp_e_KxxV, lam_K, operator=spec.operator)
  if spec.mask != "none":
    logp_xV = jax.nn.log_softmax(
        jnp.where(plausible(logp_b_xV, spec), logp_xV, -jnp.inf), axis=-1)
  if spec.eos != "composed":
    logp_xV = eos_rule(logp_xV, logp_MxxV, spec, eos_id, lam_K)
  return logp_xV, log_z_x
