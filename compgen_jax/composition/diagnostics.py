"""Factorization and projectivity diagnostics of a composition on a batch of sequences.

All inputs are next-token log-probs on the same (teacher-forced) sequences; `valid_BxT` marks
the steps to score (e.g. the generated positions). Masks M_i are the steps where expert i is
active (KL(p_i || p_b) above a threshold). Log-probs are clamped at `compose.LOGP_FLOOR`.
"""

import jax
import jax.numpy as jnp

from compgen_jax.composition.compose import clamp_logp, compose
from compgen_jax.types import Array


def kl(logp_p: Array, logp_q: Array) -> Array:
  """KL(p || q) over the last axis (0 log 0 = 0; a q of 0 under p > 0 counts as LOGP_FLOOR)."""
  logp_p, logp_q = clamp_logp(logp_p), clamp_logp(logp_q)
  return jnp.sum(jnp.exp(logp_p) * (logp_p - logp_q), axis=-1)


def total_variation(logp_p: Array, logp_q: Array) -> Array:
  return 0.5 * jnp.sum(jnp.abs(jnp.exp(logp_p) - jnp.exp(logp_q)), axis=-1)


def _masked_mean(x: Array, mask: Array) -> Array:
  mask = mask.astype(x.dtype)
  return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def step_orthogonality(logp_b_BxTxV: Array, logp_e_KxBxTxV: Array, valid_BxT: Array,
                       norm_floor: float = 1e-3) -> tuple[Array, Array]:
  """Per-step inner products of the experts' log-ratios delta_i = log p_i - log p_b.

  G_ij = mean over valid steps t of sum_v p_b(v|t) delta_i(v|t) delta_j(v|t): zero whenever no
  step has both experts away from the background (factorized experts, even when they share an
  output letter). The p_b weighting keeps tokens the background rules out (where independently
  trained models' log-probs differ by nats of noise) from dominating; for two experts
  Z_t - 1 = sum_v p_b (p_1/p_b - 1)(p_2/p_b - 1), of which this is the log-ratio form.
  Returns (G_KxK, cos_KxK = G_ij / sqrt(G_ii G_jj)); cos is NaN in the row and column of an
  expert whose norm sqrt(G_ii) is below `norm_floor` times the largest (no direction to compare).
  """
  logp_b_BxTxV = clamp_logp(logp_b_BxTxV)
  delta_KxBxTxV = clamp_logp(logp_e_KxBxTxV) - logp_b_BxTxV[None]
  w_BxTxV = jnp.exp(logp_b_BxTxV) * valid_BxT.astype(logp_b_BxTxV.dtype)[..., None]
  num_valid = jnp.maximum(valid_BxT.sum(), 1).astype(logp_b_BxTxV.dtype)
  g_KxK = jnp.einsum("ibtv,btv,jbtv->ij", delta_KxBxTxV, w_BxTxV, delta_KxBxTxV) / num_valid
  norm_K = jnp.sqrt(jnp.maximum(jnp.diag(g_KxK), 0.0))
  ok_K = (norm_K > norm_floor * jnp.max(norm_K, initial=0.0)) & (norm_K > 0)
  safe_K = jnp.where(ok_K, norm_K, 1.0)
  cos_KxK = g_KxK / (safe_K[:, None] * safe_K[None, :])
  return g_KxK, jnp.where(ok_K[:, None] & ok_K[None, :], cos_KxK, jnp.nan)


def diagnose(logp_b_BxTxV: Array, logp_e_KxBxTxV: Array, valid_BxT: Array,
             lam_K: Array | None = None, kl_threshold: float = 0.1,
             norm_floor: float = 1e-3) -> dict[str, Array]:
  """Per-step KL and active sets, their pairwise overlap, log Z_t, per-step orthogonality
  and per-mask total variation between the composition and each model.

  Returns arrays: kl_KxBxT, active_KxBxT, active_frac_K, overlap_KxK (fraction of valid steps
  where i and j are both active), log_z_BxT, mean_abs_log_z, max_abs_log_z, ortho_KxK and
  ortho_cos_KxK (`step_orthogonality`), tv_mask_K (mean TV(p^, p_i) over steps in M_i),
  tv_background (mean TV(p^, p_b) over valid steps where no expert is active).
  """
  valid_BxT = valid_BxT.astype(bool)
  logp_c_BxTxV, log_z_BxT = compose(logp_b_BxTxV, logp_e_KxBxTxV, lam_K)
  kl_KxBxT = kl(logp_e_KxBxTxV, logp_b_BxTxV[None])
  active_KxBxT = (kl_KxBxT > kl_threshold) & valid_BxT[None]
  act = active_KxBxT.astype(jnp.float32)
  num_valid = jnp.maximum(valid_BxT.sum(), 1).astype(jnp.float32)
  overlap_KxK = jnp.einsum("kbt,jbt->kj", act, act) / num_valid
  ortho_KxK, ortho_cos_KxK = step_orthogonality(logp_b_BxTxV, logp_e_KxBxTxV, valid_BxT,
                                                norm_floor)
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
  """Largest |off-diagonal| entry, NaN entries skipped: the overlap / orthogonality flag.
  NaN when no pair is left (K < 2, or every cosine undefined)."""
  k = m_KxK.shape[0]
  skip = jnp.eye(k, dtype=bool) | jnp.isnan(m_KxK)
  top = jnp.max(jnp.where(skip, -jnp.inf, jnp.abs(m_KxK)), initial=-jnp.inf)
  return jnp.where(jnp.isneginf(top), jnp.nan, top)
