"""The ridge solver every family's probes use: exact ridge regression with intercept for many
targets and lambdas from one eigendecomposition, and R^2 per target."""

import jax
import jax.numpy as jnp

_HIGHEST = jax.lax.Precision.HIGHEST
_EPS = 1e-6  # a target column whose spread is below this fraction of its mean square is constant


def ridge_fit(x_NxD: jax.Array, y_NxK: jax.Array, lambdas_A: jax.Array
              ) -> tuple[jax.Array, jax.Array]:
  """Exact ridge with intercept for every lambda: weights [A, D, K] and intercepts [A, K].

  One symmetric eigendecomposition serves all lambdas and targets: of the D x D Gram matrix when
  N >= D, else of the N x N kernel (W = X^T (X X^T + lambda)^-1 Y, the same solution).
  """
  mean_x, mean_y = x_NxD.mean(0), y_NxK.mean(0)
  xc_NxD, yc_NxK = x_NxD - mean_x[None, :], y_NxK - mean_y[None, :]
  N, D = x_NxD.shape
  gram = xc_NxD.T if D <= N else xc_NxD
  s_P, v_PxP = jnp.linalg.eigh(jnp.matmul(gram, gram.T, precision=_HIGHEST))
  inv_AxP = 1.0 / (jnp.maximum(s_P, 0.0)[None, :] + lambdas_A[:, None])
  if D <= N:
    proj_PxK = jnp.matmul(v_PxP.T, jnp.matmul(xc_NxD.T, yc_NxK, precision=_HIGHEST),
                          precision=_HIGHEST)
    w_AxDxK = jnp.einsum("dp,ap,pk->adk", v_PxP, inv_AxP, proj_PxK, precision=_HIGHEST)
  else:
    proj_PxK = jnp.matmul(v_PxP.T, yc_NxK, precision=_HIGHEST)
    xv_DxP = jnp.matmul(xc_NxD.T, v_PxP, precision=_HIGHEST)
    w_AxDxK = jnp.einsum("dp,ap,pk->adk", xv_DxP, inv_AxP, proj_PxK, precision=_HIGHEST)
  b_AxK = mean_y[None, :] - jnp.einsum("d,adk->ak", mean_x, w_AxDxK, precision=_HIGHEST)
  return w_AxDxK, b_AxK


def ridge_predict(w_AxDxK: jax.Array, b_AxK: jax.Array, x_NxD: jax.Array) -> jax.Array:
  """Predictions [A, N, K] of every lambda's probe."""
  return jnp.einsum("nd,adk->ank", x_NxD, w_AxDxK, precision=_HIGHEST) + b_AxK[:, None, :]


def r2_per_target(y_NxK: jax.Array, pred_NxK: jax.Array) -> jax.Array:
  """R^2 [K] of each target column (1 - SS_res / SS_tot); NaN for a constant column."""
  ss_tot_K = jnp.sum((y_NxK - y_NxK.mean(0)[None, :]) ** 2, 0)
  ss_res_K = jnp.sum((y_NxK - pred_NxK) ** 2, 0)
  ok_K = ss_tot_K > _EPS * jnp.sum(y_NxK ** 2, 0)
  return jnp.where(ok_K, 1.0 - ss_res_K / jnp.where(ok_K, ss_tot_K, 1.0), jnp.nan)


def fit_and_score(x_fit_NxD, y_fit_NxK, evals: dict, lambdas_A) -> dict[str, jax.Array]:
  """Fits on (x_fit, y_fit); R^2 [A, K] on each named (x, y) evaluation set."""
  w, b = ridge_fit(x_fit_NxD, y_fit_NxK, lambdas_A)
  return {name: jax.vmap(r2_per_target, in_axes=(None, 0))(y, ridge_predict(w, b, x))
          for name, (x, y) in evals.items()}
