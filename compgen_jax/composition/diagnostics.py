"""Factorization and projectivity diagnostics of a composition on a batch of sequences.

All inputs are next-token log-probs on the same (teacher-forced) sequences; `valid_BxT` marks
the steps to score (e.g. the generated positions). Masks M_i are the steps where expert i is
active (KL(p_i || p_b) above a threshold).
"""

import jax
import jax.numpy as jnp

from compgen_jax.composition.compose import compose
from compgen_jax.types import Array


def kl(logp_p: Array, logp_q: Array) -> Array:
  """KL(p || q) over the last axis."""
  return jnp.sum(jnp.exp(logp_p) * (logp_p - logp_q), axis=-1)


def total_variation(logp_p: Array, logp_q: Array) -> Array:
  return 0.5 * jnp.sum(jnp.abs(jnp.exp(logp_p) - jnp.exp(logp_q)), axis=-1)


def _masked_mean(x: Array, mask: Array) -> Array:
  mask = mask.astype(x.dtype)
  return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def diagnose(logp_b_BxTxV: Array, logp_e_KxBxTxV: Array, valid_BxT: Array,
             lam_K: Array | None = None, kl_threshold: float = 0.1) -> dict[str, Array]:
  """Per-step KL and active sets, their pairwise overlap, log Z_t, mean-difference
  orthogonality and per-mask total variation between the composition and each model.

  Returns arrays: kl_KxBxT, active_KxBxT, active_frac_K, overlap_KxK (fraction of valid steps
  where i and j are both active), log_z_BxT, mean_abs_log_z, max_abs_log_z, ortho_KxK
  ((mu_i - mu_b).(mu_j - mu_b), mu = mean next-token distribution over valid steps),
  ortho_cos_KxK (the same normalised), tv_mask_K (mean TV(p^, p_i) over steps in M_i),
  tv_background (mean TV(p^, p_b) over valid steps where no expert is active).
  """
  valid_BxT = valid_BxT.astype(bool)
  logp_c_BxTxV, log_z_BxT = compose(logp_b_BxTxV, logp_e_KxBxTxV, lam_K)
  kl_KxBxT = kl(logp_e_KxBxTxV, logp_b_BxTxV[None])
  active_KxBxT = (kl_KxBxT > kl_threshold) & valid_BxT[None]
  act = active_KxBxT.astype(jnp.float32)
  num_valid = jnp.maximum(valid_BxT.sum(), 1).astype(jnp.float32)
  overlap_KxK = jnp.einsum("kbt,jbt->kj", act, act) / num_valid
  w_BxT = valid_BxT.astype(jnp.float32)
  mean_p = lambda logp: jnp.einsum("...btv,bt->...v", jnp.exp(logp), w_BxT) / num_valid
  d_KxV = mean_p(logp_e_KxBxTxV) - mean_p(logp_b_BxTxV)[None]
  ortho_KxK = d_KxV @ d_KxV.T
  norm_K = jnp.sqrt(jnp.diag(ortho_KxK))
  ortho_cos_KxK = ortho_KxK / jnp.maximum(norm_K[:, None] * norm_K[None, :], 1e-12)
  tv_KxBxT = total_variation(logp_c_BxTxV[None], logp_e_KxBxTxV)
  tv_mask_K = jax.vmap(_masked_mean)(tv_KxBxT, active_KxBxT)
  none_active_BxT = valid_BxT & ~jnp.any(active_KxBxT, axis=0)
  abs_log_z = jnp.abs(log_z_BxT)
  return {
      "kl_KxBxT": kl_KxBxT, "active_KxBxT": active_KxBxT,
      "active_frac_K": act.sum(axis=(1, 2)) / num_valid,
      "overlap_KxK": overlap_KxK,
      "log_z_BxT": jnp.where(valid_BxT, log_z_BxT, 0.0),
      "mean_abs_log_z": _masked_mean(abs_log_z, valid_BxT),
      "max_abs_log_z": jnp.max(jnp.where(valid_BxT, abs_log_z, 0.0)),
      "ortho_KxK": ortho_KxK, "ortho_cos_KxK": ortho_cos_KxK,
      "tv_mask_K": tv_mask_K,
      "tv_background": _masked_mean(total_variation(logp_c_BxTxV, logp_b_BxTxV), none_active_BxT),
  }


def offdiag_max(m_KxK: Array) -> Array:
  """Largest |off-diagonal| entry (0 for K < 2): the overlap / orthogonality flag."""
  k = m_KxK.shape[0]
  return jnp.max(jnp.where(jnp.eye(k, dtype=bool), 0.0, jnp.abs(m_KxK)), initial=0.0)
