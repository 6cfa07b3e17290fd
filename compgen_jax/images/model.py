"""Conditional flow-matching students (x_t = (1 - t) x0 + t eps, predicting x0): a plain MLP and a
small conv U-Net, both returning the prediction and per-layer features for the probes; the loss;
EMA weights.

The condition is each slot's one-hot shape and colour, zeroed with a `null` flag set when it is
dropped (condition dropout, for guidance).
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from compgen_jax import checks
from compgen_jax.images.scenes import Geometry
from compgen_jax.types import ConfigError

SIGMA_DATA = 0.5  # the spread preconditioning assumes for the images in [-1, 1]


def default_config() -> ml_collections.ConfigDict:
  """The `model` config subtree (width/depth: MLP; channels: conv)."""
  return ml_collections.ConfigDict(dict(name="mlp", width=512, depth=3, channels=32,
                                        time_features=16, precondition=False))


def condition(shapes_BxK, colours_BxK, keep_B, geo: Geometry):
  """Condition vectors [B, K*(S+C) + 1]: one-hots times keep, then the null flag (1 - keep)."""
  keep = keep_B.astype(jnp.float32)[:, None]
  onehots = jnp.concatenate([jax.nn.one_hot(shapes_BxK, geo.num_shapes),
                             jax.nn.one_hot(colours_BxK, geo.num_colours)], -1)
  flat = onehots.reshape(onehots.shape[0], -1) * keep
  return jnp.concatenate([flat, 1.0 - keep], -1)


def time_features(t_B, num: int):
  """Sinusoidal features [B, num] of t in [0, 1]."""
  freqs = jnp.asarray(np.pi * 2.0 ** np.arange(num // 2), jnp.float32)
  angles = t_B[:, None] * freqs[None, :]
  return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], -1)


class MLP(nn.Module):
  """concat(x flat, condition, time features) -> [Dense -> GELU] x depth -> Dense(x dim)."""
  width: int
  depth: int
  time_features: int

  @nn.compact
  def __call__(self, x_BxHxWx3, t_B, cond_BxE):
    B = x_BxHxWx3.shape[0]
    h = jnp.concatenate([x_BxHxWx3.reshape(B, -1), cond_BxE,
                         time_features(t_B, self.time_features)], -1)
    acts = []
    for i in range(self.depth):
      h = nn.gelu(nn.Dense(self.width, name=f"dense_{i}")(h))
      acts.append(h)
    out = nn.Dense(int(np.prod(x_BxHxWx3.shape[1:])), name="readout")(h)
    return out.reshape(x_BxHxWx3.shape), tuple(acts)


def _cell_pool(h_BxHxWxC, geo: Geometry):
  """Mean of a feature map over each slot's cell, flattened: [B, K * C]."""
  B, H, W, C = h_BxHxWxC.shape
  g = h_BxHxWxC.reshape(B, geo.rows, H // geo.rows, geo.cols, W // geo.cols, C)
  return g.mean((2, 4)).reshape(B, -1)


class ResBlock(nn.Module):
  channels: int

  @nn.compact
  def __call__(self, h, emb_BxF):
    skip = h if h.shape[-1] == self.channels else nn.Conv(self.channels, (1, 1))(h)
    h = nn.Conv(self.channels, (3, 3))(nn.gelu(h))
    h = h + nn.Dense(self.channels)(emb_BxF)[:, None, None, :]
    h = nn.Conv(self.channels, (3, 3))(nn.gelu(h))
    return skip + h


class UNet(nn.Module):
  """Two-level U-Net: conv, ResBlock at 1x, 1/2, 1/4 (mid), back up with skips; the embedding of
  (condition, time) enters every block as a per-channel bias. Features: each block's output
  pooled per slot cell."""
  channels: int
  time_features: int
  geo: Geometry

  @nn.compact
  def __call__(self, x_BxHxWx3, t_B, cond_BxE):
    c = self.channels
    emb = jnp.concatenate([cond_BxE, time_features(t_B, self.time_features)], -1)
    emb = nn.gelu(nn.Dense(4 * c)(emb))
    pool = lambda h: nn.avg_pool(h, (2, 2), (2, 2))
    up = lambda h: jnp.repeat(jnp.repeat(h, 2, axis=1), 2, axis=2)
    h1 = ResBlock(c)(nn.Conv(c, (3, 3))(x_BxHxWx3), emb)
    h2 = ResBlock(2 * c)(pool(h1), emb)
    h3 = ResBlock(2 * c)(pool(h2), emb)
    u2 = ResBlock(2 * c)(jnp.concatenate([up(h3), h2], -1), emb)
    u1 = ResBlock(c)(jnp.concatenate([up(u2), h1], -1), emb)
    out = nn.Conv(3, (3, 3))(nn.gelu(u1))
    return out, tuple(_cell_pool(h, self.geo) for h in (h1, h2, h3, u2, u1))


def _mlp(cfg, geo):
  return MLP(cfg.width, cfg.depth, cfg.time_features)


def _unet(cfg, geo):
  return UNet(cfg.channels, cfg.time_features, geo)


MODELS = {"mlp": _mlp, "conv": _unet}


def validate(cfg: ml_collections.ConfigDict, geo: Geometry) -> None:
  checks.choice("model.name", cfg.name, MODELS)
  for name in ("width", "depth", "channels"):
    checks.integer(f"model.{name}", cfg[name], low=1)
  checks.integer("model.time_features", cfg.time_features, low=1, multiple_of=2)
  if cfg.name == "conv" and (geo.height % (4 * geo.rows) or geo.width % (4 * geo.cols)):
    raise ConfigError("scene.grid", f"the conv model pools twice: image_size {geo.height} must be "
                      f"a multiple of 4 x grid {geo.rows, geo.cols}")


def module(cfg: ml_collections.ConfigDict, geo: Geometry) -> nn.Module:
  return MODELS[cfg.name](cfg, geo)


def init(key, cfg: ml_collections.ConfigDict, geo: Geometry):
  """Parameters of the configured model."""
  x = jnp.zeros((1, geo.height, geo.width, 3))
  cond = jnp.zeros((1, geo.num_slots * (geo.num_shapes + geo.num_colours) + 1))
  return module(cfg, geo).init(key, x, jnp.zeros((1,)), cond)


def apply(params, x_BxHxWx3, t_B, cond_BxE, cfg: ml_collections.ConfigDict, geo: Geometry):
  """(x0 prediction [B, H, W, 3], features: tuple of [B, D_l])."""
  return module(cfg, geo).apply(params, x_BxHxWx3, t_B, cond_BxE)


def predict_x0(params, x_BxHxWx3, t_B, cond_BxE, cfg: ml_collections.ConfigDict, geo: Geometry):
  """The x0 prediction at (x_t, t): the network's output, or with cfg.precondition (EDM-style,
  for data of spread SIGMA_DATA) c_skip(t) x_t + c_out(t) F(c_in(t) x_t), so a narrow network
  need not carry the whole image through its hidden layers. Also returns the features."""
  if not cfg.precondition:
    return apply(params, x_BxHxWx3, t_B, cond_BxE, cfg, geo)
  t = t_B[:, None, None, None]
  var = (1.0 - t) ** 2 * SIGMA_DATA ** 2 + t ** 2  # Var(x_t) for data of spread SIGMA_DATA
  out, feats = apply(params, x_BxHxWx3 / jnp.sqrt(var), t_B, cond_BxE, cfg, geo)
  c_skip = (1.0 - t) * SIGMA_DATA ** 2 / var
  c_out = t * SIGMA_DATA / jnp.sqrt(var)
  return c_skip * x_BxHxWx3 + c_out * out, feats


def flow_loss(params, x0_BxHxWx3, t_B, eps_BxHxWx3, cond_BxE, cfg, geo: Geometry):
  """Mean squared error of the x0 prediction at x_t = (1 - t) x0 + t eps."""
  t = t_B[:, None, None, None]
  x_t = (1.0 - t) * x0_BxHxWx3 + t * eps_BxHxWx3
  pred, _ = predict_x0(params, x_t, t_B, cond_BxE, cfg, geo)
  return jnp.mean((pred - x0_BxHxWx3) ** 2)


def ema_update(ema, params, decay):
  """ema <- decay * ema + (1 - decay) * params."""
  return jax.tree.map(lambda e, p: decay * e + (1.0 - decay) * p, ema, params)
