"""The compositional preference task family: imitate a planner in a four-room grid world.

A task is a weighted module subset z [M]; the preference basis B [M, F] (the 'teacher') gives
feature f the value sum_k z_k B[k, f] (no 1/sqrt(K)). Each episode places the agent and O objects
on distinct free cells, each object with a uniformly drawn feature; the expert is greedy in the
Q-values of finite-horizon Q-iteration (qiteration.py). The student sees the RMS-normalised grid
observation at every step and predicts the expert action (5 logits). Few-shot is not defined.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections

from compgen_jax import checks, rng
from compgen_jax.tasks import gridworld, latents, qiteration
from compgen_jax.types import ConfigError

MAX_OBJECTS = 8  # 19 * 2^8 states already; the paper uses 4


class Batch(NamedTuple):
  """One batch of tasks, one demonstration each (N = horizon steps)."""
  khot: jax.Array     # [B, M] float 0/1
  z: jax.Array        # [B, M] weighted latent
  x: jax.Array        # [B, N, D] observation before each step, D = 49 * (F + 2)
  y: jax.Array        # [B, N] int32 expert actions
  mask: jax.Array     # [B, N] bool: steps up to and including 'nothing' (or the horizon)
  reward: jax.Array   # [B, N] the expert's reward per step (0 on masked steps)
  context: jax.Array | None  # always None: few-shot is not defined for this family


def init(key: jax.Array, cfg: ml_collections.ConfigDict) -> dict:
  """The preference basis B ~ N(0, 1) of shape [M, F]."""
  key_b = rng.stream(key, "teacher_weights")
  return {"basis": jax.random.normal(key_b, (cfg.num_modules, cfg.num_features))}


def feature_values(params: dict, z_BxM: jax.Array) -> jax.Array:
  """Reward [B, F] for consuming an object of each feature: z B."""
  return z_BxM @ params["basis"]


def sample_scenes(key: jax.Array, batch_size: int, cfg: ml_collections.ConfigDict
                  ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """Agent cells [B], object cells [B, O] (all distinct per task) and object features [B, O]."""
  key_cells, key_feat = jax.random.split(key)
  O = cfg.num_objects
  # The top O+1 of i.i.d. uniforms is a uniformly random ordered draw without replacement.
  _, cells_BxO1 = jax.lax.top_k(jax.random.uniform(key_cells, (batch_size, gridworld.NUM_CELLS)),
                                O + 1)
  feats_BxO = jax.random.randint(key_feat, (batch_size, O), 0, cfg.num_features)
  return cells_BxO1[:, 0], cells_BxO1[:, 1:], feats_BxO


def observations(demo_state_BxN: jax.Array, obj_cell_BxO: jax.Array, obj_feat_BxO: jax.Array,
                 num_features: int) -> jax.Array:
  """RMS-normalised flattened observations [B, N, D] of the demonstrated states."""
  O = obj_cell_BxO.shape[1]
  cell_BxN, bits_BxN = qiteration.split_state(demo_state_BxN, O)
  avail_BxNxO = qiteration.avail_of(bits_BxN, O)
  obs = jax.vmap(jax.vmap(gridworld.observe, in_axes=(0, None, None, 0, None)),
                 in_axes=(0, 0, 0, 0, None))
  return gridworld.rms_normalise(obs(cell_BxN, obj_cell_BxO, obj_feat_BxO, avail_BxNxO,
                                     num_features))


def sample_batch(params: dict, khot_BxM: jax.Array, key: jax.Array,
                 cfg: ml_collections.ConfigDict, num_shots: int = 0) -> Batch:
  """Latent weights, a fresh scene per task and its expert demonstration."""
  if num_shots:
    raise ConfigError("encoding.name", "few-shot context is not defined for the preference "
                      "family (a task has no (x, y) pairs independent of the scene)")
  key_z, key_scene = rng.stream(key, "data"), rng.stream(key, "train")
  B = khot_BxM.shape[0]
  z = latents.sample_latent(key_z, khot_BxM, cfg.weights)
  agent_B, obj_cell_BxO, obj_feat_BxO = sample_scenes(key_scene, B, cfg)
  obj_value_BxO = jnp.take_along_axis(feature_values(params, z), obj_feat_BxO, axis=1)
  demo = jax.vmap(qiteration.demonstrate, in_axes=(0, 0, 0, None, None, None))(
      agent_B, obj_cell_BxO, obj_value_BxO, cfg.num_backups, cfg.discount, cfg.horizon)
  x = observations(demo.state, obj_cell_BxO, obj_feat_BxO, cfg.num_features)
  return Batch(khot_BxM, z, x, demo.action, demo.valid, demo.reward, None)


def x_dim(cfg: ml_collections.ConfigDict) -> int:
  return gridworld.obs_dim(cfg.num_features)


def out_dim(cfg: ml_collections.ConfigDict) -> int:
  del cfg
  return gridworld.NUM_ACTIONS


def default_config() -> ml_collections.ConfigDict:
  """The `task` config subtree (paper defaults)."""
  return ml_collections.ConfigDict(dict(
      family="preference", num_modules=16, max_hotness=3, frac_ood=0.25, support="random",
      max_retries=1000, weights="discrete", num_features=32, num_objects=4, horizon=8,
      num_backups=8, discount=0.9))


def validate(cfg: ml_collections.ConfigDict) -> None:
  """Preference-specific checks, before anything compiles."""
  checks.choice("task.weights", cfg.weights, latents.WEIGHT_KINDS)
  for name in ("num_features", "horizon", "num_backups"):
    checks.integer(f"task.{name}", cfg[name], low=1)
  # The state space is 19 * 2^num_objects; every object needs a cell besides the agent's.
  checks.integer("task.num_objects", cfg.num_objects, 1, min(MAX_OBJECTS, gridworld.NUM_CELLS - 1))
  if cfg.num_modules > cfg.num_features:
    raise ConfigError("task.num_modules", f"must be <= task.num_features ({cfg.num_features}), "
                      f"got {cfg.num_modules}")
  checks.number("task.discount", cfg.discount, 0, 1, low_open=True)
