"""Theorem 3.1 made concrete: an ordinary ReLU MLP that approximates the hyperteacher on (z, x).

The teacher's pre-activation is s_h = sum_i x_i q_ih(z) + c_h(z) with q and c linear in z, so only
I*H products of two linear functions are needed, whatever M. Each product is polarised,
p*q = ((p+q)^2 - (p-q)^2) / 4, and t^2 on [-R, R] is replaced by its piecewise-linear interpolant
with N ReLU units. The network is the MLP student (`students/mlp.py`) with hidden widths
(2*I*H*N + H, H):
  dense_0: for every (i, h, sign, knot j) the unit relu(alpha x_i +- q_ih(z)/alpha - t_j), plus H
           units relu(c_h(z) - lb_h) that carry the teacher's bias (c_h >= lb_h on the domain);
  dense_1: s_h ~ sum over units of (sign / 4) * slope change + c_h; its ReLU is the teacher's ReLU;
  readout: Omega (no bias).
The domain is every task of at most K active modules with weights in [0, 1] and x in [-1, 1]^I.
alpha_ih = sqrt(A_ih) (A_ih = max |q_ih| on the domain) balances the two factors, so the range
R_ih = alpha + A/alpha = 2 sqrt(A_ih) is the smallest possible (<= 1 + A_ih, the unbalanced range).
"""

import functools
import math

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from compgen_jax.types import ConfigError

_MIN_RANGE = 1e-6  # floor on A_ih, so 1/alpha stays finite for a product that is identically 0


def check_teacher(params: dict) -> None:
  """The construction covers teachers with one hidden layer; raises ConfigError otherwise."""
  if len(params["theta"]) != 1:
    raise ConfigError("task.num_hidden_layers",
                      f"the explicit construction covers one teacher hidden layer (the paper's "
                      f"setting), got {len(params['theta'])}")


def _topk_sum(v_MxD: jax.Array, k: int) -> jax.Array:
  """Sum of the k largest entries of each column (entries >= 0)."""
  return jnp.sort(v_MxD, axis=0)[v_MxD.shape[0] - k:].sum(0)


@functools.partial(jax.jit, static_argnames="max_hotness")
def product_ranges(params: dict, max_hotness: int) -> tuple[jax.Array, jax.Array]:
  """(alpha_IxH, R_IxH): balancing scale and the range of the polarised arguments p +- q.

  max over the domain of |sum_m z_m Theta_mih| / sqrt(K) is the larger of the sums of the K largest
  positive and the K largest negative parts (a linear function on a box with <= K nonzeros).
  """
  check_teacher(params)
  theta_MxIxH = params["theta"][0]
  k = min(max_hotness, theta_MxIxH.shape[0])
  flat = theta_MxIxH.reshape(theta_MxIxH.shape[0], -1)
  a = jnp.maximum(_topk_sum(jax.nn.relu(flat), k), _topk_sum(jax.nn.relu(-flat), k))
  a_IxH = jnp.maximum(a.reshape(theta_MxIxH.shape[1:]) / math.sqrt(max_hotness), _MIN_RANGE)
  alpha_IxH = jnp.sqrt(a_IxH)
  return alpha_IxH, alpha_IxH + a_IxH / alpha_IxH


def _bias_floor(params: dict, max_hotness: int) -> jax.Array:
  """lb_H <= c_h(z) on the domain (<= 0): the K most negative module biases."""
  beta_MxH = params["beta"][0]
  k = min(max_hotness, beta_MxH.shape[0])
  return -_topk_sum(jax.nn.relu(-beta_MxH), k) / math.sqrt(max_hotness)


def hidden_widths(I: int, H: int, resolution: int) -> tuple[int, int]:
  """Hidden widths of the constructed MLP: (2*I*H*N + H, H)."""
  return (2 * I * H * resolution + H, H)


def neuron_count(M: int, I: int, H: int, O: int, resolution: int) -> int:
  """All neurons: inputs (M + I), hidden (2*I*H*N + 2H), outputs O. Linear in M at fixed N."""
  return M + I + sum(hidden_widths(I, H, resolution)) + O


def student_config(I: int, H: int, resolution: int) -> ml_collections.ConfigDict:
  """The `student.mlp` subsection that `mlp.apply` evaluates the constructed parameters with."""
  widths = hidden_widths(I, H, resolution)
  return ml_collections.ConfigDict(dict(width=widths[0], depth=len(widths), widths=widths))


def square_interpolant(r_IxH: jax.Array, N: int) -> tuple[jax.Array, jax.Array]:
  """Knots t [I, H, N] and weights w: sum_j w_j relu(t - t_j) + R^2 interpolates t^2 on [-R, R].

  Knots t_j = -R + 2Rj/N, j < N; the unit at t_0 is linear on the domain (t >= -R). The slope on
  [t_j, t_j+1] is t_j + t_j+1, and each unit's weight is the change of slope at its knot.
  """
  t_IxHxN = r_IxH[..., None] * (2.0 * jnp.arange(N, dtype=r_IxH.dtype) / N - 1.0)[None, None, :]
  step_IxHx1 = 2.0 * r_IxH[..., None] / N
  rest = jnp.broadcast_to(2.0 * step_IxHx1, r_IxH.shape + (N - 1,))
  return t_IxHxN, jnp.concatenate([2.0 * t_IxHxN[..., :1] + step_IxHx1, rest], axis=-1)


@functools.partial(jax.jit, static_argnames=("max_hotness", "resolution"))
def construct(params: dict, max_hotness: int, resolution: int) -> dict:
  """Parameters of the constructed network in the MLP student's tree format (inputs [z, x]).

  Jitted and pure in `params` (vmappable over stacked teachers); dtype follows the teacher's.
  """
  check_teacher(params)
  theta_MxIxH, beta_MxH, omega_HxO = params["theta"][0], params["beta"][0], params["omega"]
  M, I, H = theta_MxIxH.shape
  N, dtype, sq = resolution, theta_MxIxH.dtype, math.sqrt(max_hotness)
  alpha_IxH, r_IxH = product_ranges(params, max_hotness)
  sign_S = jnp.asarray([1.0, -1.0], dtype)
  t_IxHxN, w_IxHxN = square_interpolant(r_IxH, N)
  # dense_0 on [z, x]: argument alpha x_i + sign q_ih(z) / alpha, minus the knot.
  kz_MxIxHxSxN = ((theta_MxIxH / (sq * alpha_IxH[None]))[..., None, None]
                  * sign_S[None, None, None, :, None])
  kz_MxIxHxSxN = jnp.broadcast_to(kz_MxIxHxSxN, (M, I, H, 2, N))
  kx_IxIxHxSxN = jnp.eye(I, dtype=dtype)[:, :, None, None, None] * alpha_IxH[None, :, :, None, None]
  kx_IxIxHxSxN = jnp.broadcast_to(kx_IxIxHxSxN, (I, I, H, 2, N))
  units = I * H * 2 * N
  k0_units = jnp.concatenate([kz_MxIxHxSxN.reshape(M, units), kx_IxIxHxSxN.reshape(I, units)])
  k0_bias = jnp.concatenate([beta_MxH / sq, jnp.zeros((I, H), dtype)])
  lb_H = _bias_floor(params, max_hotness)
  b0_units = -jnp.broadcast_to(t_IxHxN[:, :, None, :], (I, H, 2, N)).reshape(units)
  # dense_1: (f(p+q) - f(p-q)) / 4 summed over i; the constant R^2 of f cancels in the difference.
  k1_IxHxSxNxH = (w_IxHxN[:, :, None, :, None] * sign_S[None, None, :, None, None] / 4.0
                  * jnp.eye(H, dtype=dtype)[None, :, None, None, :])
  k1 = jnp.concatenate([k1_IxHxSxNxH.reshape(units, H), jnp.eye(H, dtype=dtype)])
  return {
      "dense_0": {"kernel": jnp.concatenate([k0_units, k0_bias], axis=1),
                  "bias": jnp.concatenate([b0_units, -lb_H])},
      "dense_1": {"kernel": k1, "bias": lb_H},
      "readout": {"kernel": omega_HxO, "bias": jnp.zeros(omega_HxO.shape[1:], dtype)},
  }


@jax.jit
def omega_norm(params: dict) -> jax.Array:
  """max_o sum_h |Omega_ho|: the sup-norm gain of the readout a -> a Omega."""
  return jnp.abs(params["omega"]).sum(0).max()


@functools.partial(jax.jit, static_argnames="max_hotness")
def error_bound(params: dict, max_hotness: int, resolution: int) -> jax.Array:
  """The paper's sup-error bound ||Omega|| * I * R^2 / (2 N^2), with R = max_ih R_ih."""
  _, r_IxH = product_ranges(params, max_hotness)
  I = r_IxH.shape[0]
  return omega_norm(params) * I * jnp.max(r_IxH) ** 2 / (2.0 * resolution ** 2)


@functools.partial(jax.jit, static_argnames="max_hotness")
def sharp_error_bound(params: dict, max_hotness: int, resolution: int) -> jax.Array:
  """A bound <= half the paper's: the interpolant of t^2 lies above t^2 by at most R^2/N^2, so
  the difference of two such errors is at most R^2/N^2 (not 2R^2/N^2), with per-product ranges."""
  _, r_IxH = product_ranges(params, max_hotness)
  e_H = (r_IxH ** 2).sum(0) / (4.0 * resolution ** 2)
  return (jnp.abs(params["omega"]) * e_H[:, None]).sum(0).max()


def required_resolution(params: dict, max_hotness: int, eps: float) -> int:
  """Smallest N whose paper bound is <= eps: N = ceil(sqrt(||Omega|| I R^2 / (2 eps)))."""
  at_one = float(error_bound(params, max_hotness, 1))
  return max(1, math.ceil(np.sqrt(at_one / eps) - 1e-9))
