"""Composition success from checkpoints: sample prompts of training (ID) and held-out (OOD)
combinations with the EMA weights, detect every slot exactly, and score; sample grids as PNGs.

Rows of eval.jsonl (one per run and evaluated step): '<split>/success' (every slot's shape and
colour right), '<split>/shape_acc', '<split>/colour_acc', '<split>/rejected' (detector refused
the slot), and for held-out prompts 'ood_concept/s<k>_<attr><v>/success' (success over the
held-out samples whose prompt has that concept).
"""

import functools
import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from compgen_jax import rng
from compgen_jax import workdir as workdir_lib
from compgen_jax.images import detector, sampler, scenes
from compgen_jax.images import train as train_lib
from compgen_jax.training import passes as engine_passes
from compgen_jax.training.cache import cache_by_config

GRID_DIR = "grids"
SPLITS = {"id": ("train_idx", "n_train", "test"), "ood": ("ood_idx", "n_ood", "ood")}


def prompts(key, state: train_lib.ImageState, which: str, num: int, repeat: int,
            geo: scenes.Geometry):
  """num prompts of a split's combinations, each repeated `repeat` times: (shapes, colours)."""
  idx_name, count_name, _ = SPLITS[which]
  shapes, colours, _ = train_lib.draw_scenes(key, getattr(state.split, idx_name),
                                             getattr(state.split, count_name), num, geo)
  return jnp.repeat(shapes, repeat, axis=0), jnp.repeat(colours, repeat, axis=0)


def sample_and_detect(params, key, shapes, colours, cfg, geo):
  """Pixels [N, H, W, 3] of samples for the prompts, and (shape, colour right, accepted) [N, K]."""
  x, _ = sampler.sample(params, key, shapes, colours, cfg, geo)
  pixels = sampler.to_pixels(x)
  det = detector.detect(pixels, geo, cfg.detector)
  shape_ok, colour_ok = detector.slot_correct(det, shapes, colours)
  return pixels, shape_ok, colour_ok, det.ok


def evaluate_run(state: train_lib.ImageState, cfg: ml_collections.ConfigDict) -> dict:
  """Per-sample results of one run on ID and OOD prompts (the run's test / ood streams)."""
  geo = scenes.geometry(cfg.scene)
  out = {}
  for which, (_, _, stream) in SPLITS.items():
    key_prompt, key_noise = jax.random.split(rng.stream(train_lib.run_key(state), stream))
    shapes, colours = prompts(key_prompt, state, which, cfg.eval.num_prompts,
                              cfg.eval.samples_per_prompt, geo)
    _, shape_ok, colour_ok, ok = sample_and_detect(state.ema, key_noise, shapes, colours, cfg,
                                                   geo)
    out[which] = dict(shapes=shapes, colours=colours, shape_ok=shape_ok, colour_ok=colour_ok,
                      ok=ok)
  return out


@cache_by_config
def evaluate_one(cfg: ml_collections.ConfigDict):
  """evaluate_run of cfg, one object per config (the engine's pass compiles it once)."""
  return functools.partial(evaluate_run, cfg=cfg)


def concept_success(success_N, shapes_NxK, colours_NxK, geo: scenes.Geometry) -> dict:
  """{'s<k>_<attr><v>': success rate over samples whose prompt has that concept} (NaN if none)."""
  out = {}
  for k in range(geo.num_slots):
    for attr, values, n in (("shape", shapes_NxK, geo.num_shapes),
                            ("colour", colours_NxK, geo.num_colours)):
      for v in range(n):
        has = values[:, k] == v
        out[f"s{k}_{attr}{v}"] = float(success_N[has].mean()) if has.any() else float("nan")
  return out


def rows(result: dict, grid: list[dict], step: int, geo: scenes.Geometry) -> list[dict]:
  """eval.jsonl rows from evaluate's stacked per-sample results."""
  result = jax.tree.map(np.asarray, result)
  out = []
  for r, run in enumerate(grid):
    row = {"step": int(step), **run}
    for which, res in result.items():
      shape_ok, colour_ok, ok = res["shape_ok"][r], res["colour_ok"][r], res["ok"][r]
      success = (shape_ok & colour_ok).all(-1)
      row.update({f"{which}/success": float(success.mean()),
                  f"{which}/shape_acc": float(shape_ok.mean()),
                  f"{which}/colour_acc": float(colour_ok.mean()),
                  f"{which}/rejected": float(1.0 - ok.mean())})
      if which == "ood":
        concepts = concept_success(success, res["shapes"][r], res["colours"][r], geo)
        row.update({f"ood_concept/{k}/success": v for k, v in concepts.items()})
    out.append(row)
  return out


def grid_png(pixels_PxSxHxWx3, wrong_PxS, path: str, labels: list[str]) -> str:
  """Rows: prompts (labelled); columns: samples; a wrong sample gets a red frame."""
  import matplotlib  # noqa: PLC0415 - only the grid writer needs a plotting backend

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415

  P, S = wrong_PxS.shape
  fig, axes = plt.subplots(P, S, figsize=(0.9 * S + 1.6, 0.9 * P), squeeze=False)
  for p in range(P):
    for s in range(S):
      ax = axes[p, s]
      img = np.pad(pixels_PxSxHxWx3[p, s], ((1, 1), (1, 1), (0, 0)))
      if wrong_PxS[p, s]:
        img[0, :], img[-1, :], img[:, 0], img[:, -1] = (1, 0, 0), (1, 0, 0), (1, 0, 0), (1, 0, 0)
      ax.imshow(img, interpolation="nearest")
      ax.set_xticks([])
      ax.set_yticks([])
    axes[p, 0].set_ylabel(labels[p], rotation=0, ha="right", va="center", fontsize=6)
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path


def prompt_label(shapes_K, colours_K) -> str:
  return " | ".join(f"{scenes.COLOUR_NAMES[c]} {scenes.SHAPE_NAMES[s]}"
                    for s, c in zip(shapes_K, colours_K, strict=True))


@cache_by_config
def _jitted_sample(cfg: ml_collections.ConfigDict):
  geo = scenes.geometry(cfg.scene)
  return jax.jit(lambda params, key, shapes, colours: sample_and_detect(
      params, key, shapes, colours, cfg, geo))


def write_grid(state: train_lib.ImageState, run: int, cfg, path: str) -> str:
  """The sample grid PNG of run `run` of a stacked state on held-out prompts (grid_prompts rows,
  grid_samples columns; prompts and noise from the run's `ood` stream, as evaluation's)."""
  geo = scenes.geometry(cfg.scene)
  one = jax.tree.map(lambda a: a[run], state)
  P, S = int(cfg.eval.grid_prompts), int(cfg.eval.grid_samples)
  key_prompt, key_noise = jax.random.split(
      rng.stream(rng.stream(train_lib.run_key(one), "ood"), "data"))
  shapes, colours = prompts(key_prompt, one, "ood", P, S, geo)
  pixels, shape_ok, colour_ok, _ = _jitted_sample(cfg)(one.ema, key_noise, shapes, colours)
  pixels, wrong = np.asarray(pixels), ~np.asarray((shape_ok & colour_ok).all(-1))
  shapes, colours = np.asarray(shapes), np.asarray(colours)
  labels = [prompt_label(shapes[p * S], colours[p * S]) for p in range(P)]
  return grid_png(pixels.reshape(P, S, *pixels.shape[1:]), wrong.reshape(P, S), path, labels)


def evaluate_workdir(cfg: ml_collections.ConfigDict, workdir: str, step: int | None = None,
                     grids: bool = True, every: bool = False) -> list[dict]:
  """Evaluates the selected checkpoints (the latest by default; `every`: all) through the engine's
  pass (training.passes.over_checkpoints) and writes each step's rows to eval.jsonl as it is
  done, replacing rows of the same step, with the seed-0 runs' sample grids; returns the rows."""
  grid = train_lib.run_info(cfg, train_lib.run_grid(cfg))
  geo = scenes.geometry(cfg.scene)

  def rows_of(s: int, result: dict, state: train_lib.ImageState) -> list[dict]:
    new = rows(result, grid, s, geo)
    if grids:
      for r, run in enumerate(grid):
        if run["seed"] == 0:
          write_grid(state, r, cfg, os.path.join(
              workdir, GRID_DIR, f"step{s}_coverage{run['coverage']:g}_seed0.png"))
    return new

  return engine_passes.over_checkpoints(
      workdir, train_lib.init_one(cfg), train_lib.abstract_inputs(cfg, train_lib.run_grid(cfg)),
      grid, {"evaluate": evaluate_one(cfg)}, workdir_lib.EVAL_FILE, step, every, rows=rows_of)
