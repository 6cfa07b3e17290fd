"""Finite-horizon Q-iteration on the preference grid, and the greedy expert rollout.

A state is (agent cell, availability bits of the O objects): s = cell * 2^O + avail, so there are
19 * 2^O states (304 for O = 4). Everything here is for one task; callers vmap over tasks.
'nothing' (action 0) ends the episode: its Q-value is 0, so the expert stops exactly when no move
is worth more than 0. Ties go to the lowest action index (jnp.argmax), so 'nothing' wins a tie
and demonstrations are deterministic.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from compgen_jax.tasks import gridworld as gw


class Demo(NamedTuple):
  """A greedy expert trajectory of N = horizon steps (one task)."""
  state: jax.Array   # int32 [N] state before each step
  action: jax.Array  # int32 [N] expert action (0 once the episode has ended)
  valid: jax.Array   # bool [N] step taken before or at the 'nothing' that ends the episode
  reward: jax.Array  # float32 [N] reward of each step (0 on invalid steps)


def num_states(num_objects: int) -> int:
  return gw.NUM_CELLS * 2 ** num_objects


def split_state(state, num_objects: int):
  """(agent cell, availability bits) of state indices (any shape)."""
  return state // 2 ** num_objects, state % 2 ** num_objects


def avail_of(bits: jax.Array, num_objects: int) -> jax.Array:
  """Availability flags [..., O] of availability bit patterns [...]."""
  shifts = jnp.arange(num_objects).reshape((1,) * bits.ndim + (num_objects,))
  return ((bits[..., None] >> shifts) & 1).astype(jnp.float32)


def transition_tables(obj_cell_O: jax.Array, obj_value_O: jax.Array
                      ) -> tuple[jax.Array, jax.Array]:
  """next_state [S, A] and reward [S, A] of every deterministic transition of one task.

  Stepping onto an available object earns its value and clears its bit; a consumed object's cell
  is an empty cell. 'nothing' leaves the state as is and earns 0.
  """
  O = obj_cell_O.shape[0]
  cell_S, bits_S = (jnp.asarray(v) for v in split_state(np.arange(num_states(O)), O))
  next_cell_SxA = jnp.asarray(gw.NEXT_CELL_CxA)[cell_S]
  moves_A = jnp.arange(gw.NUM_ACTIONS) != gw.NOTHING
  avail_SxO = avail_of(bits_S, O)
  hit_SxAxO = (next_cell_SxA[:, :, None] == obj_cell_O[None, None, :]) & moves_A[None, :, None]
  picked_SxAxO = hit_SxAxO.astype(jnp.float32) * avail_SxO[:, None, :]
  reward_SxA = picked_SxAxO @ obj_value_O
  picked_bits_SxA = (picked_SxAxO.astype(jnp.int32) << jnp.arange(O)[None, None, :]).sum(-1)
  next_bits_SxA = bits_S[:, None] & ~picked_bits_SxA
  return next_cell_SxA * 2 ** O + next_bits_SxA, reward_SxA


def q_values(next_state_SxA: jax.Array, reward_SxA: jax.Array, num_backups: int,
             discount: float) -> jax.Array:
  """Q [S, A] after `num_backups` backups Q(s,a) = r(s,a) + discount * max_a' Q(s',a') from 0,
  with Q(s, nothing) = 0 (terminal)."""
  moves_A = jnp.arange(gw.NUM_ACTIONS) != gw.NOTHING

  def backup(_, q_SxA):
    v_S = q_SxA.max(-1)
    return jnp.where(moves_A[None, :], reward_SxA + discount * v_S[next_state_SxA], 0.0)

  return jax.lax.fori_loop(0, num_backups, backup, jnp.zeros_like(reward_SxA))


def rollout(q_SxA: jax.Array, next_state_SxA: jax.Array, reward_SxA: jax.Array,
            start_state: jax.Array, horizon: int) -> Demo:
  """Greedy rollout of `horizon` steps; the state is frozen once 'nothing' ends the episode."""

  def step(carry, _):
    s, done = carry
    action = jnp.where(done, gw.NOTHING, jnp.argmax(q_SxA[s]))
    reward = jnp.where(done, 0.0, reward_SxA[s, action])
    ends = done | (action == gw.NOTHING)
    s_next = jnp.where(ends, s, next_state_SxA[s, action])
    return (s_next, ends), Demo(s, action.astype(jnp.int32), ~done, reward)

  _, demo = jax.lax.scan(step, (start_state, jnp.asarray(False)), length=horizon)
  return demo


def demonstrate(agent_cell: jax.Array, obj_cell_O: jax.Array, obj_value_O: jax.Array,
                num_backups: int, discount: float, horizon: int) -> Demo:
  """The expert demonstration of one task from its start (all objects available)."""
  O = obj_cell_O.shape[0]
  next_state_SxA, reward_SxA = transition_tables(obj_cell_O, obj_value_O)
  q_SxA = q_values(next_state_SxA, reward_SxA, num_backups, discount)
  start = agent_cell * 2 ** O + (2 ** O - 1)
  return rollout(q_SxA, next_state_SxA, reward_SxA, start, horizon)
