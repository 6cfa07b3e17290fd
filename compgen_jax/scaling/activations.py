"""Activation capture for any student, stacked so one program probes every layer of every run.

A student's `apply` returns `(pred, {layer: activations [B, N, D]})` (MLP: pre-ReLU output of
each Dense layer incl. readout; transformer: each block's output and the final LayerNorm's output
at the x tokens, as the reference probes them). A probe reads each layer at the last sample /
token of each task (index -1 on the N axis), plus phi(z) itself.
"""

import jax
import jax.numpy as jnp
import ml_collections

from compgen_jax.encodings import language
from compgen_jax.encodings import registry as encodings
from compgen_jax.scaling import batches
from compgen_jax.scaling import state as run_state
from compgen_jax.scaling.state import RunState

INPUT_LAYER = "input"  # the encoding phi(z): its probe is the "input decoder"


def _last(acts: jax.Array) -> jax.Array:
  """[B, D] from [B, N, D] (last sample) or from any [B, ...] (flattened)."""
  if acts.ndim == 3:
    return acts[:, -1, :]
  return acts.reshape(acts.shape[0], -1)


def encoding_features(state: RunState, batch, cfg: ml_collections.ConfigDict) -> jax.Array:
  """phi(z) as features [B, E]; a sequence encoding as its bag of token counts [B, V-1], since
  its token order is random and carries no information."""
  phi = encodings.encode(cfg.encoding.name, state.task["encoding"], batch.z, batch.context)
  vocab_size = run_state.vocab_size(cfg)
  if vocab_size:
    phi = language.bag_of_counts(phi, vocab_size)
  return phi.reshape(phi.shape[0], -1)


def capture(state: RunState, batch, cfg: ml_collections.ConfigDict) -> dict[str, jax.Array]:
  """{layer: [B, D]} in order: phi(z) as INPUT_LAYER, then the student's layers in its order."""
  _, acts = batches.predict(state.params, state, batch, cfg)
  return {INPUT_LAYER: encoding_features(state, batch, cfg),
          **{name: _last(a) for name, a in acts.items()}}


def stack(acts: dict[str, jax.Array]) -> jax.Array:
  """[L, B, Dmax]: layers zero-padded to the widest one.

  Zero columns change no ridge solution (centred, they add a null direction with weight 0), so
  the padded probe of a layer equals its unpadded probe.
  """
  d_max = max(a.shape[-1] for a in acts.values())
  return jnp.stack([jnp.pad(a.astype(jnp.float32), ((0, 0), (0, d_max - a.shape[-1])))
                    for a in acts.values()])


def layer_names(state: RunState, cfg: ml_collections.ConfigDict) -> tuple[str, ...]:
  """Names of the stacked layers in stack order; `state` may be abstract (one run, unbatched)."""
  names: list[str] = []

  def trace(state):
    bits_B = jnp.ones((2,), jnp.int32)
    batch = batches.batch_for_bits(state, bits_B, jax.random.key(0), cfg)
    names.extend(capture(state, batch, cfg))  # dict order survives only at trace time
    return jnp.zeros(())

  jax.eval_shape(trace, state)
  return tuple(names)
