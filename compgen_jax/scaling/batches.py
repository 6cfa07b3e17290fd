"""Drawing a batch of tasks and predicting on it: what training and evaluation both use."""

import jax
import ml_collections

from compgen_jax import rng
from compgen_jax.encodings import registry as encodings
from compgen_jax.scaling import state as run_state
from compgen_jax.scaling.state import RunState
from compgen_jax.students import registry as students
from compgen_jax.tasks import latents, splits
from compgen_jax.tasks import registry as families


def draw_batch(state: RunState, key: jax.Array, idx_T: jax.Array, n: jax.Array, num_tasks: int,
               bits_T: jax.Array, cfg: ml_collections.ConfigDict):
  """`num_tasks` tasks drawn from the first `n` entries of `idx_T`, with their data (O(1) in T)."""
  key_idx, key_data = jax.random.split(key)
  idx_B = splits.sample_indices(key_idx, idx_T, n, num_tasks)
  return batch_for_bits(state, bits_T[idx_B], key_data, cfg)


def batch_for_bits(state: RunState, bits_B: jax.Array, key: jax.Array,
                   cfg: ml_collections.ConfigDict):
  """Data of the tasks given as module bitmasks (also used for subsets outside the table)."""
  return batch_for_khot(state, latents.khot_from_bits(bits_B, cfg.task.num_modules), key,
                        cfg)


def batch_for_khot(state: RunState, khot_BxM: jax.Array, key: jax.Array,
                   cfg: ml_collections.ConfigDict):
  """Data of the tasks given as k-hot rows [B, M], with few-shot context when the encoding
  needs it."""
  family = families.get(cfg.task.family)
  num_shots = cfg.encoding.num_shots if encodings.get(cfg.encoding.name).needs_context else 0
  return family.sample_batch(state.task["teacher"], khot_BxM, key, cfg.task, num_shots)


# Stream of a sequence encoding's random token order (see predict).
ORDER_STREAM = "encoding_order"


def predict(params, state: RunState, batch, cfg: ml_collections.ConfigDict,
            key: jax.Array | None = None):
  """Student predictions and activations for a batch: student(phi(z), x).

  `key` draws a sequence encoding's token order (vector encodings ignore it); by default it is
  the ORDER_STREAM of the run key folded with state.step, so evaluation is deterministic.
  """
  _, _, out_dim, _ = run_state.dims(cfg)
  enc = encodings.get(cfg.encoding.name)
  if enc.is_sequence and key is None:
    key = rng.step_key(rng.stream(run_state.run_key(state), ORDER_STREAM), state.step)
  phi = encodings.encode(cfg.encoding.name, state.task["encoding"], batch.z, batch.context, key)
  return students.apply_student(cfg.student, params, phi, batch.x, out_dim,
                                run_state.vocab_size(cfg))
