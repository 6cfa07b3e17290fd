"""Held-out test sets and the jitted, seed-vmapped evaluation passes the experiments share.

A test set has N = its longest string's length letter slots (shorter strings are padded), so a
model combination compiles once per test-set shape.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from compgen_jax import rng
from compgen_jax.composition import compose as compose_lib
from compgen_jax.composition import decode as decode_lib
from compgen_jax.composition import diagnostics, rules, sampling
from compgen_jax.composition import spec as spec_lib
from compgen_jax.letters import data
from compgen_jax.types import Array


def test_inputs(cfg, seed_keys_S: Array, lengths: list[int], per_len: int,
                name: str) -> tuple[Array, Array]:
  """Held-out strings (x_SxBxN, len_SxB), B = len(lengths) * per_len, N = max(lengths), from
  stream 'test/name'."""
  len_B = np.repeat(np.asarray(lengths, np.int32), per_len)
  # jitted, as every host-side step of an experiment: op by op, each primitive compiles alone
  x_SxBxN = jax.jit(jax.vmap(lambda k: data.sample_inputs(
      rng.stream(k, f"test/{name}"), len(len_B), max(lengths))))(seed_keys_S)
  return x_SxBxN, jnp.asarray(np.broadcast_to(len_B, x_SxBxN.shape[:2]))


@functools.partial(jax.jit, static_argnums=(3,))
def references(x_SxBxN: Array, len_SxB: Array, table_V, layout: str):
  """Ground-truth sequences (tokens, forced_mask, target_mask), each [S, B, T]."""
  y_SxBxN = jnp.take(jnp.asarray(table_V), x_SxBxN)
  return jax.vmap(lambda x, n, y: data.build(x, n, y, layout))(x_SxBxN, len_SxB, y_SxBxN)


@functools.cache
def _decoder(models: tuple, greedy: bool, spec: spec_lib.Spec, trunc: spec_lib.Truncation):
  fn = functools.partial(decode_lib.decode, models, greedy=greedy, spec=spec, trunc=trunc)
  return jax.jit(jax.vmap(lambda p, f, m, lam, temp, key: fn(p, f, m, lam, temp, key),
                          in_axes=(0, 0, 0, None, None, 0)))


def position_logps(models: tuple, params: tuple, tokens_BxT: Array, lam_K=None,
                   spec: spec_lib.Spec = spec_lib.PAPER) -> tuple[Array, Array]:
  """The authors' composition of 'position' sequences: one forward pass of every model over the
  input and the composed log-probs (`rules.step` under `spec`) at every position [B, N, V],
  with the valid mask [B, N]."""
  x_BxN, _, valid_BxN = data.position_io(tokens_BxT)
  logp_MxBxNxV = decode_lib.teacher_forced_logps(models, params, x_BxN, valid_BxN)
  logp_BxNxV, _ = rules.step(logp_MxBxNxV, lam_K, spec, models[0].eos_id)
  return logp_BxNxV, valid_BxN


@functools.cache
def _position_composer(models: tuple, greedy: bool, spec: spec_lib.Spec,
                       trunc: spec_lib.Truncation):
  """`position_logps` per seed; its argmax (or a sample, row b from fold_in(key, b)) written
  into the output half."""
  def one_seed(params, tokens_BxT, lam_K, temperature, key):
    logp_BxNxV, valid_BxN = position_logps(models, params, tokens_BxT, lam_K, spec)
    if greedy:
      y_BxN = jnp.argmax(logp_BxNxV, -1).astype(jnp.int32)
    else:
      keys_B = sampling.row_keys(key, logp_BxNxV.shape[0])
      y_BxN = jax.vmap(lambda k, x: jax.random.categorical(
          k, sampling.truncate(x / temperature, trunc)))(keys_B, logp_BxNxV).astype(jnp.int32)
    y_BxN = jnp.where(valid_BxN, y_BxN, data.PAD)
    return jnp.concatenate([tokens_BxT[:, :y_BxN.shape[1]], y_BxN], axis=1)
  return jax.jit(jax.vmap(one_seed, in_axes=(0, 0, None, None, 0)))


def _chunks(size: int, batch: int):
  return [(i, min(i + batch, size)) for i in range(0, size, batch)]


def _pad_to(a: Array, size: int, axis: int = 1) -> Array:
  pad = size - a.shape[axis]
  if pad == 0:
    return a
  reps = jnp.take(a, jnp.zeros((pad,), jnp.int32), axis=axis)
  return jnp.concatenate([a, reps], axis=axis)


def decode_all(cfg, models: tuple, params: tuple, forced_SxBxT: Array, mask_SxBxT: Array,
               lam_K=None, seed_keys_S: Array | None = None) -> np.ndarray:
  """Decoded tokens [S, B, T] of the composition, in chunks of compose.eval_batch strings:
  lockstep decoding (`decode.decode`) for the shifted layouts, one forward pass composed per
  position for 'position'.

  When sampling, chunk c draws from fold_in(the seed's 'decode' key, c): no chunk repeats
  another's draws.
  """
  spec, trunc = spec_lib.from_config(cfg.compose), spec_lib.truncation(cfg.compose)
  lam_K = compose_lib.weights(spec.operator, lam_K, len(models) - 1)
  s, b, _ = forced_SxBxT.shape
  keys = (jax.vmap(lambda k: rng.stream(k, "decode"))(seed_keys_S) if seed_keys_S is not None
          else jax.vmap(jax.random.key)(jnp.arange(s)))
  batch, temperature = min(cfg.compose.eval_batch, b), jnp.float32(cfg.compose.temperature)
  position = cfg.data.layout == "position"
  fn = (_position_composer if position else _decoder)(tuple(models), bool(cfg.compose.greedy),
                                                      spec, trunc)
  out = []
  for c, (lo, hi) in enumerate(_chunks(b, batch)):
    keys_c = jax.vmap(lambda k, c=c: jax.random.fold_in(k, c))(keys)
    chunk = _pad_to(forced_SxBxT[:, lo:hi], batch)
    if position:  # the input half is all there is to feed
      tokens = fn(tuple(params), chunk, lam_K, temperature, keys_c)
    else:
      tokens = fn(tuple(params), chunk, _pad_to(mask_SxBxT[:, lo:hi], batch), lam_K,
                  temperature, keys_c).tokens_BxT
    out.append(np.asarray(tokens)[:, :hi - lo])
  return np.concatenate(out, axis=1)


def exact_match(cfg, models: tuple, params: tuple, x_SxBxN, len_SxB, table_V, lam_K=None,
                seed_keys_S=None) -> tuple[np.ndarray, np.ndarray]:
  """(exact match [S, B] against `table_V` applied to the input, decoded tokens [S, B, T])."""
  ref, forced, _ = references(x_SxBxN, len_SxB, table_V, cfg.data.layout)
  tokens = decode_all(cfg, models, params, ref, forced, lam_K, seed_keys_S)
  return np.all(tokens == np.asarray(ref), axis=-1).astype(np.float32), tokens


def mean_where(em_SxB: np.ndarray, mask_SxB: np.ndarray) -> np.ndarray:
  """Per-seed mean of `em` over the strings in `mask` [S] (NaN for a seed with none)."""
  count_S = mask_SxB.sum(axis=1)
  total_S = np.where(mask_SxB, em_SxB, 0.0).sum(axis=1)
  return np.where(count_S > 0, total_S / np.maximum(count_S, 1), np.nan)


@functools.cache
def _diagnoser(models: tuple, layout: str, kl_threshold: float, norm_floor: float,
               tail_logp: float):
  def one_seed(params, tokens_BxT, valid_BxT, lam_K):
    if layout == "position":  # the models read x; their outputs are scored in place
      x_BxN, _, valid_BxT = data.position_io(tokens_BxT)
      logp_MxBxTxV = decode_lib.teacher_forced_logps(models, params, x_BxN, valid_BxT)
    else:
      logp_MxBxTxV = decode_lib.teacher_forced_logps(models, params, tokens_BxT)
    out = diagnostics.diagnose(logp_MxBxTxV[0], logp_MxBxTxV[1:], valid_BxT, lam_K, kl_threshold,
                               norm_floor, tail_logp)
    out = {k: v for k, v in out.items() if not k.endswith("BxT")}
    if layout == "position":  # no EOS in the authors' vocabulary
      out["p_eos_at_eos"] = out["max_p_eos_elsewhere"] = jnp.float32(jnp.nan)
      return out
    logp_c_BxTxV, _ = compose_lib.compose(logp_MxBxTxV[0], logp_MxBxTxV[1:], lam_K)
    # next-token log-probs at position t score token t + 1: shift the target mask by one.
    is_eos_BxT = jnp.concatenate([tokens_BxT[:, 1:] == data.EOS,
                                  jnp.zeros_like(tokens_BxT[:, :1], bool)], axis=1) & valid_BxT
    p_eos_BxT = jnp.exp(logp_c_BxTxV[..., data.EOS])
    out["p_eos_at_eos"] = jnp.sum(p_eos_BxT * is_eos_BxT) / jnp.maximum(is_eos_BxT.sum(), 1)
    out["max_p_eos_elsewhere"] = jnp.max(jnp.where(valid_BxT & ~is_eos_BxT, p_eos_BxT, 0.0))
    return out
  return jax.jit(jax.vmap(one_seed, in_axes=(0, 0, 0, None)))


def diagnose(cfg, models: tuple, params: tuple, tokens_SxBxT, lam_K=None) -> dict:
  """Diagnostics (see diagnostics.diagnose) per seed on the first eval_batch sequences.

  Scored steps are the ones that predict a generated token (output letters and EOS; the
  output positions for 'position').
  """
  tokens = np.asarray(tokens_SxBxT)[:, :cfg.compose.eval_batch]
  lam_K = np.ones((len(models) - 1,), np.float32) if lam_K is None else np.asarray(lam_K)
  valid = _predicts_output(tokens, cfg.data.layout)
  diagnoser = _diagnoser(tuple(models), cfg.data.layout, float(cfg.compose.kl_threshold),
                        float(cfg.compose.ortho_norm_floor), float(cfg.compose.tail_logp))
  return jax.device_get(diagnoser(tuple(params), tokens, valid, lam_K))


@functools.partial(jax.jit, static_argnums=(1,))
def _predicts_output(tokens_SxBxT: Array, layout: str) -> Array:
  """Steps t whose next token (t + 1) is generated, recovered from the token layout."""
  nxt = tokens_SxBxT[..., 1:]
  pos = jnp.arange(1, tokens_SxBxT.shape[-1]).reshape((1,) * (nxt.ndim - 1) + (-1,))
  if layout == "aligned":  # generated tokens sit at even positions (y) or follow SEP (EOS)
    gen = (pos % 2 == 0) & (nxt != data.PAD)
  else:  # everything after SEP
    after_sep = jnp.cumsum(tokens_SxBxT == data.SEP, axis=-1)[..., :-1] > 0
    gen = after_sep & (nxt != data.PAD)
  return jnp.concatenate([gen, jnp.zeros_like(gen[..., :1])], axis=-1)
