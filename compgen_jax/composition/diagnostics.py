"""Factorization and projectivity diagnostics of a composition on a batch of sequences.

All inputs are next-token log-probs on the same (teacher-forced) sequences; `valid_BxT` marks
the steps to score (e.g. the generated positions). Masks M_i are the steps where expert i is
active (KL(p_i || p_b) above a threshold). Log-probs are clamped at `compose.LOGP_FLOOR`.
"""

import jax
import jax.numpy as jnp

from compgen_jax.composition.compose import OPERATORS, clamp_logp, compose, weights
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


def tail_risk(logp_b_BxTxV: Array, logp_e_KxBxTxV: Array, logp_c_BxTxV: Array,
              lam_K: Array | None = None, tail_logp: float = -6.9, *,
              operator: str = "paper") -> dict[str, Array]:
  """Per-step measures of a composition won by the background's tail, where KL sees nothing.

  A token v with log p_b(v) < tail_logp (default p_b < 1e-3) gets the composed logit
  log p_b + sum_i lam_i (log p_i - log p_b); with two experts that is log p_1 + log p_2 -
  log p_b, so two experts that each give v a small probability lift it far above them when
  the background gives it less. The boost is the composed logit minus log p_b (each
  operator's `boost`): under the authors' operator (lam_K None) sum_i log p_i - 2 log p_b,
  which is the paper's for two experts. Returns, per step [B, T]:
    tail_boost: max over tail tokens of the boost, sum_i lam_i (log p_i - log p_b) (0 when none);
    unranked_mass: composed mass on tokens that no component (background or expert) ranks
      first: ~0 when the composition picks one of their choices, > 0.5 when it picks another;
    unranked_pick: the composed argmax is such a token.
  """
  logp_b, logp_e = clamp_logp(logp_b_BxTxV), clamp_logp(logp_e_KxBxTxV)
  lam_K = weights(operator, lam_K, logp_e.shape[0])
  boost_BxTxV = OPERATORS[operator].boost(logp_b, logp_e, lam_K)
  in_tail = logp_b < tail_logp
  tail_boost_BxT = jnp.max(jnp.where(in_tail, boost_BxTxV, -jnp.inf), axis=-1, initial=-jnp.inf)
  vocab = logp_b.shape[-1]
  tops_MxBxT = jnp.concatenate([jnp.argmax(logp_b, -1)[None], jnp.argmax(logp_e, -1)])
  ranked_BxTxV = jnp.any(jax.nn.one_hot(tops_MxBxT, vocab, dtype=bool), axis=0)
  mass_BxT = jnp.sum(jnp.where(ranked_BxTxV, 0.0, jnp.exp(logp_c_BxTxV)), axis=-1)
  pick_BxT = ~jnp.take_along_axis(ranked_BxTxV, jnp.argmax(logp_c_BxTxV, -1)[..., None],
                                  axis=-1)[..., 0]
  return {"tail_boost_BxT": jnp.where(jnp.isneginf(tail_boost_BxT), 0.0, tail_boost_BxT),
          "unranked_mass_BxT": mass_BxT, "unranked_pick_BxT": pick_BxT}


def diagnose(logp_b_BxTxV: Array, logp_e_KxBxTxV: Array, valid_BxT: Array,
             lam_K: Array | None = None, kl_threshold: float = 0.1,
             norm_floor: float = 1e-3, tail_logp: float = -6.9, *,
             operator: str = "paper") -> dict[str, Array]:
  """Per-step KL and active sets, their pairwise overlap, log Z_t, per-step orthogonality
  and per-mask total variation between the composition and each model, composed by
  `operator` (`compose.OPERATORS`; lam_K None for one without weights).

  Returns arrays: kl_KxBxT, active_KxBxT, active_frac_K, overlap_KxK (fraction of valid steps
  where i and j are both active), log_z_BxT, mean_abs_log_z, max_abs_log_z, ortho_KxK and
  ortho_cos_KxK (`step_orthogonality`), tv_mask_K (mean TV(p^, p_i) over steps in M_i),
  tv_background (mean TV(p^, p_b) over valid steps where no expert is active), and the
  tail risk (`tail_risk`): mean / max tail_boost, mean / max unranked_mass, unranked_pick_frac
  (fraction of steps whose composed argmax no component ranks first), and log Z_t split by
  the active sets: mean_abs_log_z_none / _one / _both (no expert, exactly one, two or more);
  mean entropies (nats) of the background and of each expert, mean_entropy_b / _K.
  """
  valid_BxT = valid_BxT.astype(bool)
  logp_c_BxTxV, log_z_BxT = compose(logp_b_BxTxV, logp_e_KxBxTxV, lam_K, operator=operator)
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
  risk = tail_risk(logp_b_BxTxV, logp_e_KxBxTxV, logp_c_BxTxV, lam_K, tail_logp,
                   operator=operator)
  num_active_BxT = act.sum(axis=0)
  by_active = {f"mean_abs_log_z_{name}": _masked_mean(abs_log_z, valid_BxT & sel)
               for name, sel in (("none", num_active_BxT == 0), ("one", num_active_BxT == 1),
                                 ("both", num_active_BxT >= 2))}
  entropy = lambda lp: -jnp.sum(jnp.exp(lp) * clamp_logp(lp), axis=-1)
  return {
      **by_active,
      "mean_entropy_b": _masked_mean(entropy(logp_b_BxTxV), valid_BxT),
      "mean_entropy_K": jax.vmap(lambda lp: _masked_mean(entropy(lp), valid_BxT))(logp_e_KxBxTxV),
      "tail_boost_BxT": jnp.where(valid_BxT, risk["tail_boost_BxT"], 0.0),
      "mean_tail_boost": _masked_mean(risk["tail_boost_BxT"], valid_BxT),
      "max_tail_boost": jnp.max(jnp.where(valid_BxT, risk["tail_boost_BxT"], -jnp.inf),
                                initial=-jnp.inf),
      "mean_unranked_mass": _masked_mean(risk["unranked_mass_BxT"], valid_BxT),
      "max_unranked_mass": jnp.max(jnp.where(valid_BxT, risk["unranked_mass_BxT"], 0.0)),
      "unranked_pick_frac": _masked_mean(risk["unranked_pick_BxT"].astype(jnp.float32),
                                         valid_BxT),
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


@jax.jit  # called per row on the host: one program per shape, not one per primitive
def offdiag_max(m_KxK: Array) -> Array:
  """Largest |off-diagonal| entry, NaN entries skipped: the overlap / orthogonality flag.
  NaN when no pair is left (K < 2, or every cosine undefined)."""
  k = m_KxK.shape[0]
  skip = jnp.eye(k, dtype=bool) | jnp.isnan(m_KxK)
  top = jnp.max(jnp.where(skip, -jnp.inf, jnp.abs(m_KxK)), initial=-jnp.inf)
  return jnp.where(jnp.isneginf(top), jnp.nan, top)
