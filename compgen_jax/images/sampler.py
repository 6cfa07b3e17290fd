"""Deterministic DDIM-style sampling of the flow (x_t = (1 - t) x0 + t eps) from t = 1 to 0, with
classifier-free guidance, optionally keeping the conditional pass's features along the way."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from compgen_jax import checks
from compgen_jax.images import model as model_lib
from compgen_jax.images.scenes import Geometry


def default_config() -> ml_collections.ConfigDict:
  """The `sampler` config subtree; guidance 1 is the conditional model alone (one pass a step)."""
  return ml_collections.ConfigDict(dict(num_steps=20, guidance=1.0))


def validate(cfg: ml_collections.ConfigDict) -> None:
  checks.integer("sampler.num_steps", cfg.num_steps, low=1)
  checks.number("sampler.guidance", cfg.guidance, low=0)


def times(num_steps: int) -> np.ndarray:
  """The grid [num_steps + 1] from 1 down to 0."""
  return np.linspace(1.0, 0.0, num_steps + 1).astype(np.float32)


def sample(params, key, shapes_BxK, colours_BxK, cfg: ml_collections.ConfigDict,
           geo: Geometry, keep_steps: tuple[int, ...] = ()):
  """Samples [B, H, W, 3] in model space ([-1, 1]) for the given prompts, and the conditional
  pass's features at the sampler steps `keep_steps` (step 0 sees pure noise, t = 1): a tuple over
  layers of [len(keep_steps), B, D_l] (empty tuple when keep_steps is empty)."""
  B = shapes_BxK.shape[0]
  cond = model_lib.condition(shapes_BxK, colours_BxK, jnp.ones((B,), bool), geo)
  null = model_lib.condition(shapes_BxK, colours_BxK, jnp.zeros((B,), bool), geo)
  x = jax.random.normal(key, (B, geo.height, geo.width, 3))
  ts = jnp.asarray(times(cfg.sampler.num_steps))
  guidance = float(cfg.sampler.guidance)

  keep = jnp.asarray(keep_steps or (-1,), jnp.int32)
  dims = [(f.shape[-1],) for f in jax.eval_shape(
      lambda: model_lib.apply(params, x, ts[:1].repeat(B), cond, cfg.model, geo)[1])]
  kept0 = tuple(jnp.zeros((len(keep), B, *d)) for d in dims) if keep_steps else ()

  def step(carry, i):
    x, kept = carry
    t, t_next = ts[i], ts[i + 1]
    t_B = jnp.full((B,), t)
    x0, feats = model_lib.predict_x0(params, x, t_B, cond, cfg.model, geo)
    if guidance != 1.0:
      x0_null, _ = model_lib.predict_x0(params, x, t_B, null, cfg.model, geo)
      x0 = x0_null + guidance * (x0 - x0_null)
    # Only the kept steps' features are stored (slot len(keep) is out of range: dropped).
    slot = jnp.where(jnp.any(keep == i), jnp.argmax(keep == i), len(keep))
    kept = tuple(k.at[slot].set(f, mode="drop") for k, f in zip(kept, feats, strict=False))
    eps = (x - (1.0 - t) * x0) / t  # t > 0 on every step taken
    return ((1.0 - t_next) * x0 + t_next * eps, kept), None

  (x, kept), _ = jax.lax.scan(step, (x, kept0), jnp.arange(cfg.sampler.num_steps))
  return x, kept


def to_pixels(x_BxHxWx3):
  """Model space [-1, 1] -> pixels [0, 1] (clipped)."""
  return jnp.clip((x_BxHxWx3 + 1.0) / 2.0, 0.0, 1.0)
