"""Training the image runs (seeds x coverage levels, one program): the family's one-run
functions, init_run and train_step, trained by the engine (training.loop.run: vmap or map over
the runs, scan chunks, resume, sharding over devices, NaN stop, the metric writers, progress
bar)."""

import functools
import itertools
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from compgen_jax import checks, rng
from compgen_jax.images import model as model_lib
from compgen_jax.images import sampler, scenes, split
from compgen_jax.tasks import splits as task_splits
from compgen_jax.training import chunk as chunk_lib
from compgen_jax.training import loop, optim
from compgen_jax.training.cache import cache_by_config
from compgen_jax.training.config import validate_train

HPARAMS = ("coverage",)


@flax.struct.dataclass
class ImageState:
  step: jax.Array    # int32 [], steps completed
  key: jax.Array     # uint32 [2], the run key's data
  params: Any
  ema: Any           # EMA of params: what evaluation and probes use
  opt_state: Any
  split: split.Split
  hparams: Any       # {"coverage": scalar}


def run_key(state: ImageState) -> jax.Array:
  return jax.random.wrap_key_data(state.key)


def validate(cfg: ml_collections.ConfigDict) -> scenes.Geometry:
  """Every check before anything compiles or is written; ConfigError naming the field."""
  checks.integer("num_seeds", cfg.num_seeds, low=1)
  geo = scenes.geometry(cfg.scene)
  split.validate(cfg.split.strategy, cfg.split.coverage, geo)
  model_lib.validate(cfg.model, geo)
  sampler.validate(cfg.sampler)
  for name in ("cond_dropout", "ema_decay"):
    checks.number(f"flow.{name}", cfg.flow[name], 0, 1, high_open=True)
  checks.positive("optim.learning_rate", cfg.optim.learning_rate)
  validate_train(cfg.train)
  optim.validate_schedule(cfg.optim, cfg.train.num_steps)
  return geo


def run_grid(cfg: ml_collections.ConfigDict) -> list[dict]:
  """One dict per run (seed-major): index, seed, coverage."""
  return [{"run": r, "seed": s, "coverage": float(c)} for r, (s, c) in
          enumerate(itertools.product(range(cfg.num_seeds), cfg.split.coverage))]


def run_keys(cfg: ml_collections.ConfigDict, grid: list[dict]) -> jax.Array:
  return jnp.stack([rng.run_key(cfg.seed, run["seed"]) for run in grid])


def host_splits(cfg: ml_collections.ConfigDict, grid: list[dict]) -> split.Split:
  """Every run's split [R, T], on the host from its key's `split` stream (ConfigError if one
  cannot cover every concept). Programs that differ only in their model (a width sweep's) share
  one computation: the launcher validates each before any starts, and the paper's scenes have
  T = 1.7M combinations per run."""
  return _host_splits(cfg.seed, tuple((run["seed"], run["coverage"]) for run in grid),
                      scenes.geometry(cfg.scene), cfg.split.strategy, cfg.split.max_retries)


@functools.lru_cache(maxsize=2)  # [R, T] int32 twice: the splits of one program at a time
def _host_splits(seed: int, runs: tuple, geo: scenes.Geometry, strategy: str,
                 max_retries: int) -> split.Split:
  keys = jnp.stack([rng.run_key(seed, s) for s, _ in runs])
  data = np.asarray(jax.random.key_data(jax.vmap(lambda k: rng.stream(k, "split"))(keys)))
  splits = [split.host_split(data[r], coverage, strategy, geo, max_retries)
            for r, (_, coverage) in enumerate(runs)]
  out = jax.tree.map(lambda *a: np.stack(a), *splits)
  for a in jax.tree.leaves(out):  # shared by every caller: read-only
    a.flags.writeable = False
  return out


def init_run(key: jax.Array, coverage: jax.Array, run_split: split.Split,
             cfg: ml_collections.ConfigDict) -> ImageState:
  """One run: student parameters (and their EMA copy) from the `student` stream, optimiser."""
  params = model_lib.init(rng.stream(key, "student"), cfg.model, scenes.geometry(cfg.scene))
  return ImageState(step=jnp.zeros((), jnp.int32), key=jax.random.key_data(key), params=params,
                    ema=params, opt_state=optim.optimizer(cfg.optim).init(params),
                    split=run_split, hparams={"coverage": jnp.asarray(coverage, jnp.float32)})


@cache_by_config
def init_one(cfg: ml_collections.ConfigDict):
  """(key, coverage, split) -> one run's state, one object per config (compiled once)."""
  return functools.partial(init_run, cfg=cfg)


def jitted_init(cfg: ml_collections.ConfigDict):
  """jit(vmap(init_run)) over stacked (keys, coverages, splits)."""
  return loop.jitted_init(init_one(cfg))


def init_inputs(cfg: ml_collections.ConfigDict, grid: list[dict], splits=None):
  """(keys, coverages, splits) for jitted_init; `splits` when the caller built them already."""
  splits = host_splits(cfg, grid) if splits is None else splits
  return run_keys(cfg, grid), jnp.asarray([r["coverage"] for r in grid], jnp.float32), splits


def abstract_inputs(cfg: ml_collections.ConfigDict, grid: list[dict]) -> tuple:
  """init_one's inputs with the coverages and splits as shapes (none computed): what checkpoints
  restore against (loop.restore)."""
  geo = scenes.geometry(cfg.scene)
  R, T = len(grid), geo.num_combos
  vec, scalar = jax.ShapeDtypeStruct((R, T), jnp.int32), jax.ShapeDtypeStruct((R,), jnp.int32)
  return (run_keys(cfg, grid), jax.ShapeDtypeStruct((R,), jnp.float32),
          split.Split(vec, scalar, vec, scalar))


def draw_scenes(key, idx_T, count, n: int, geo: scenes.Geometry):
  """n scenes of combinations drawn uniformly from idx_T[:count]: (shapes, colours, offsets)
  [n, K] each."""
  key_combo, key_offset = jax.random.split(key)
  combos = task_splits.sample_indices(key_combo, idx_T, jnp.maximum(count, 1), n)
  shapes, colours = scenes.decode_combos(combos, geo)
  return shapes, colours, jax.random.randint(key_offset, (n, geo.num_slots), 0, geo.num_offsets)


def train_step(state: ImageState, cfg: ml_collections.ConfigDict):
  """One run's AdamW step of the x0 flow-matching loss on a batch rendered on the device."""
  geo = scenes.geometry(cfg.scene)
  table = scenes.cell_table(geo)
  key = rng.step_key(rng.stream(run_key(state), "train"), state.step)
  key_scene, key_t, key_eps, key_drop = jax.random.split(key, 4)
  B = cfg.train.batch_size
  shapes, colours, offsets = draw_scenes(key_scene, state.split.train_idx, state.split.n_train,
                                         B, geo)
  x0 = 2.0 * scenes.render(table, shapes, colours, offsets, geo) - 1.0
  keep = jax.random.bernoulli(key_drop, 1.0 - cfg.flow.cond_dropout, (B,))
  cond = model_lib.condition(shapes, colours, keep, geo)
  t = jax.random.uniform(key_t, (B,))
  eps = jax.random.normal(key_eps, x0.shape)
  loss, grads = jax.value_and_grad(model_lib.flow_loss)(state.params, x0, t, eps, cond,
                                                        cfg.model, geo)
  opt_state = state.opt_state
  opt_state.hyperparams["learning_rate"] = cfg.optim.learning_rate * optim.lr_factor(
      state.step, cfg.optim, cfg.train.num_steps)
  updates, opt_state = optim.optimizer(cfg.optim).update(grads, opt_state, state.params)
  params = optax.apply_updates(state.params, updates)
  # Warm-up of the decay, (1 + step) / (10 + step) while below ema_decay: early on the EMA
  # follows the weights instead of averaging in their initial values.
  step = state.step.astype(jnp.float32)
  decay = jnp.minimum(cfg.flow.ema_decay, (1.0 + step) / (10.0 + step))
  ema = model_lib.ema_update(state.ema, params, decay)
  metrics = {"train/loss": loss, "train/grad_norm": optax.tree.norm(grads),
             "train/lr": opt_state.hyperparams["learning_rate"]}
  return state.replace(step=state.step + 1, params=params, ema=ema, opt_state=opt_state), metrics


@cache_by_config
def step_one(cfg: ml_collections.ConfigDict):
  """state -> (state, metrics): one run's training step, one object per config."""
  return functools.partial(train_step, cfg=cfg)


def make_chunk(cfg: ml_collections.ConfigDict, strategy: str = "auto"):
  """The engine's jitted chunk of train.chunk_size steps: states -> (states, metrics
  {name: [R, steps]}, finite [R]), donating the state."""
  return chunk_lib.make_chunk(step_one(cfg), cfg.train.chunk_size, strategy)


def run_info(cfg: ml_collections.ConfigDict, grid: list[dict], splits=None) -> list[dict]:
  """The grid with each run's numbers of training and held-out combinations."""
  splits = host_splits(cfg, grid) if splits is None else splits
  return [{**run, "n_train": int(splits.n_train[r]), "n_ood": int(splits.n_ood[r])}
          for r, run in enumerate(grid)]


def restore(cfg: ml_collections.ConfigDict, workdir: str, step: int | None = None):
  """(step, stacked state) of a checkpoint of `workdir` (default the latest)."""
  return loop.restore(workdir, init_one(cfg), abstract_inputs(cfg, run_grid(cfg)), step)


def family(cfg: ml_collections.ConfigDict, grid: list[dict], splits) -> loop.Family:
  """The image runs of `grid` (run_info) for the engine; no evaluator during training (images
  are sampled and checked from the checkpoints: evaluate.py, probes.py)."""
  return loop.Family(grid=grid, init_one=init_one(cfg), inputs=init_inputs(cfg, grid, splits),
                     step=step_one(cfg))


def train(cfg: ml_collections.ConfigDict, workdir: str, stop_after: int | None = None
          ) -> list[dict]:
  """Trains every run of `cfg` in `workdir` through the one loop, resuming from its latest
  checkpoint; `stop_after` (a checkpoint step) ends early as a preemption would. Returns the
  last step's rows."""
  validate(cfg)
  splits = host_splits(cfg, run_grid(cfg))  # an impossible split fails here, before any file
  return loop.run(family(cfg, run_info(cfg, run_grid(cfg), splits), splits), cfg, workdir,
                  stop_after)
