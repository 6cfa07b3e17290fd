"""Q-iteration experts on hand-made grids: they collect what is worth it, avoid what is not, stop,
respect walls, never earn an object twice, and are deterministic."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax.tasks import gridworld as gw
from compgen_jax.tasks import qiteration as qi

NOTHING, UP, RIGHT, DOWN, LEFT = range(5)
FAR = [(5, 1), (5, 2), (4, 1)]  # bottom-left room, far from the agents below


@functools.partial(jax.jit, static_argnames=("horizon",))
def _demo(agent, cells, values, horizon=8):
  return qi.demonstrate(agent, cells, values, num_backups=8, discount=0.9, horizon=horizon)


def demo_of(agent_rc, objects, horizon=8):
  """Demo (as numpy) for an agent at (row, col) and objects [((row, col), value)], padded to 4
  objects with worthless ones (value 0) in the bottom-left room."""
  objects = list(objects) + [(rc, 0.0) for rc in FAR[: 4 - len(objects)]]
  cells = jnp.asarray([gw.cell_of(*rc) for rc, _ in objects], jnp.int32)
  values = jnp.asarray([v for _, v in objects], jnp.float32)
  demo = _demo(jnp.asarray(gw.cell_of(*agent_rc)), cells, values, horizon=horizon)
  return jax.tree.map(np.asarray, demo)


def path_of(demo, agent_rc):
  """(row, col) of the agent before each valid step and after the last one."""
  rc = [agent_rc]
  for a, ok in zip(demo.action, demo.valid, strict=True):
    if ok and a != NOTHING:
      nxt = (rc[-1][0] + gw.DELTAS[a][0], rc[-1][1] + gw.DELTAS[a][1])
      rc.append(rc[-1] if gw.WALLS_7x7[nxt] else nxt)
  return rc


def test_layout_is_four_rooms_with_19_free_cells():
  assert gw.NUM_CELLS == 19 and gw.WALLS_7x7.shape == (7, 7)
  assert gw.WALLS_7x7[0].all() and gw.WALLS_7x7[:, 0].all() and gw.WALLS_7x7[3, 1]
  assert not gw.WALLS_7x7[3, 2:5].any()  # the corridor


def test_walls_block_moves():
  nxt = gw.NEXT_CELL_CxA
  assert nxt[gw.cell_of(1, 1), UP] == gw.cell_of(1, 1)
  assert nxt[gw.cell_of(1, 1), LEFT] == gw.cell_of(1, 1)
  assert nxt[gw.cell_of(1, 2), RIGHT] == gw.cell_of(1, 2)  # (1, 3) is a wall
  assert nxt[gw.cell_of(1, 2), DOWN] == gw.cell_of(2, 2)
  assert (nxt[:, NOTHING] == np.arange(gw.NUM_CELLS)).all()


def test_collects_reachable_positive_object_around_the_wall():
  # (1, 4) is two columns away but behind the wall (1, 3): the shortest path has 6 moves.
  demo = demo_of((1, 2), [((1, 4), 1.0)])
  assert demo.action[0] == DOWN
  assert path_of(demo, (1, 2))[6] == (1, 4)
  np.testing.assert_allclose(demo.reward.sum(), 1.0)
  assert demo.reward[5] == pytest.approx(1.0)
  assert demo.action[6] == NOTHING and demo.valid[6] and not demo.valid[7]


def test_prefers_the_nearer_of_two_positive_objects_first():
  demo = demo_of((1, 1), [((2, 2), 1.0), ((5, 5), 1.0)])
  assert path_of(demo, (1, 1))[2] == (2, 2)
  assert demo.reward[1] == pytest.approx(1.0)


def test_never_steps_onto_a_negative_object():
  # Two equally short routes (1,1) -> (2,2): via (1,2) (negative) or via (2,1) (empty).
  demo = demo_of((1, 1), [((1, 2), -0.5), ((2, 2), 1.0)])
  assert (1, 2) not in path_of(demo, (1, 1))
  assert (demo.reward >= 0).all() and demo.reward.sum() == pytest.approx(1.0)


def test_stops_with_nothing_when_nothing_is_worth_reaching():
  demo = demo_of((1, 1), [((1, 2), -1.0), ((2, 1), -0.1), ((5, 5), -2.0), ((4, 4), 0.0)])
  assert demo.action[0] == NOTHING
  np.testing.assert_array_equal(demo.valid, [True] + [False] * 7)
  assert (demo.reward == 0).all()


def test_pays_a_small_cost_for_a_large_reward_behind_it():
  # (2, 2) is the only way out of the top-left room.
  demo = demo_of((1, 1), [((2, 2), -0.1), ((3, 3), 2.0)])
  assert demo.reward.sum() == pytest.approx(1.9, abs=1e-6)
  worse = demo_of((1, 1), [((2, 2), -3.0), ((3, 3), 2.0)])
  assert worse.action[0] == NOTHING


def test_consumed_objects_give_no_second_reward():
  cells = jnp.asarray([gw.cell_of(1, 2)] + [gw.cell_of(*rc) for rc in FAR], jnp.int32)
  values = jnp.asarray([1.0, 0.0, 0.0, 0.0])
  next_state, reward = jax.jit(qi.transition_tables)(cells, values)
  full, without = 0b1111, 0b1110
  here = gw.cell_of(1, 1)
  assert reward[here * 16 + full, RIGHT] == 1.0
  assert next_state[here * 16 + full, RIGHT] == gw.cell_of(1, 2) * 16 + without
  assert reward[here * 16 + without, RIGHT] == 0.0
  # The expert takes it once, then has nothing left to do.
  demo = demo_of((1, 1), [((1, 2), 1.0)])
  np.testing.assert_array_equal(demo.action[:2], [RIGHT, NOTHING])
  assert demo.reward.sum() == pytest.approx(1.0)


def test_mask_covers_steps_up_to_nothing_and_the_horizon():
  demo = demo_of((1, 1), [((5, 5), 1.0)])  # 8 moves away: it takes the whole horizon
  assert demo.valid.all() and (demo.action != NOTHING).all()
  assert demo.reward[-1] == pytest.approx(1.0)
  short = demo_of((1, 1), [((5, 5), 1.0)], horizon=5)
  assert short.valid.all() and short.reward.sum() == 0.0


def test_q_values_follow_the_bellman_backup():
  cells = jnp.asarray([gw.cell_of(1, 2), gw.cell_of(3, 3), gw.cell_of(5, 5), gw.cell_of(4, 1)])
  values = jnp.asarray([0.7, -0.4, 1.3, 0.2])
  next_state, reward = jax.jit(qi.transition_tables)(cells, values)
  q_values = jax.jit(qi.q_values, static_argnums=(2, 3))
  q8, q9 = q_values(next_state, reward, 8, 0.9), q_values(next_state, reward, 9, 0.9)
  expect = np.asarray(reward) + 0.9 * np.asarray(q8).max(-1)[np.asarray(next_state)]
  expect[:, NOTHING] = 0.0
  np.testing.assert_allclose(q9, expect, rtol=1e-6, atol=1e-6)
