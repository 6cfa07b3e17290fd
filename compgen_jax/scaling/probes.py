"""Closed-form linear probes of the scaling experiment: ridge regression with intercept
(training/ridge.py) from activations to task targets.

One solve per layer handles every target column at once and every lambda from one
eigendecomposition; the pass is vmapped over layers and runs and jitted. Protocol (paper): fit
on half of `num_tasks` ID tasks, score R^2 on the other half (ID) and on `num_tasks` held-out
tasks (OOD). Targets: the weighted latent z, and (hyperteacher) the teacher's effective first-layer
weights sum_m z~_m Theta_m. Tasks come from the run's `probe` stream, never the training stream.
"""

import functools

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from compgen_jax import checks, rng
from compgen_jax.scaling import activations, batches
from compgen_jax.scaling import state as run_state
from compgen_jax.scaling.state import RunState
from compgen_jax.tasks import registry as families
from compgen_jax.training.cache import cache_by_config
from compgen_jax.training.ridge import fit_and_score
from compgen_jax.types import ConfigError

TARGETS = ("z", "theta")
SPLITS = ("id", "ood")


def default_config() -> ml_collections.ConfigDict:
  """The `probe` config subtree (the evaluators' settings live in `evals`)."""
  return ml_collections.ConfigDict(dict(
      lambdas=(1.0,), num_tasks=1024, targets=TARGETS,
      # The best layer is chosen after the student's first layer: an MLP's first Dense layer is
      # an affine map of (phi(z), x), so it decodes whatever phi(z) does (trivially ~1).
      skip_first=True))


def validate(cfg: ml_collections.ConfigDict) -> None:
  """Checks of the probe settings before anything compiles; raises ConfigError."""
  s = cfg.probe
  checks.numbers("probe.lambdas", s.lambdas, low=0, low_open=True)
  checks.integer("probe.num_tasks", s.num_tasks, low=4, multiple_of=2)
  checks.choices("probe.targets", s.targets, TARGETS, allow_empty=True)
  if "theta" in s.targets and not families.get(cfg.task.family).module_weights:
    raise ConfigError("probe.targets", f"'theta' (teacher weights) needs a family with "
                      f"per-module teacher weights (the hyperteacher), not {cfg.task.family!r}")


def targets(state: RunState, batch, cfg: ml_collections.ConfigDict) -> dict[str, jax.Array]:
  """{target: [B, k]} for the configured targets."""
  out = {}
  for name in cfg.probe.targets:
    if name == "z":
      out[name] = batch.z
    else:  # theta: the teacher's effective first-layer weights sum_m z~_m Theta_m
      zt_BxM = batch.z / np.sqrt(cfg.task.max_hotness)
      w_BxIxH = jnp.einsum("bm,mih->bih", zt_BxM, state.task["teacher"]["theta"][0])
      out[name] = w_BxIxH.reshape(w_BxIxH.shape[0], -1)
  return out


def _draw(state, key, which: str, bits_T, cfg):
  split, n = state.task["split"], int(cfg.probe.num_tasks)
  idx_T, count = ((split.train_idx, split.n_train) if which == "id"
                  else (split.ood_idx, split.n_ood))
  batch = batches.draw_batch(state, key, idx_T, jnp.maximum(count, 1), n, bits_T, cfg)
  return activations.stack(activations.capture(state, batch, cfg)), targets(state, batch, cfg)


def probe_data(state: RunState, bits_T: jax.Array, cfg: ml_collections.ConfigDict):
  """Activations [L, N, D] and targets [N, K] (all targets side by side) of the probe's ID and
  held-out tasks, from the run's `probe` stream; and the target names and column counts."""
  key = rng.stream(run_state.run_key(state), "probe")
  x_id_LxNxD, y_id = _draw(state, rng.stream(key, "test"), "id", bits_T, cfg)
  x_ood_LxNxD, y_ood = _draw(state, rng.stream(key, "ood"), "ood", bits_T, cfg)
  names = tuple(y_id)
  y_id_NxK = jnp.concatenate([y_id[k] for k in names], axis=-1)
  y_ood_NxK = jnp.concatenate([y_ood[k] for k in names], axis=-1)
  return (x_id_LxNxD, x_ood_LxNxD, y_id_NxK, y_ood_NxK), names, [y_id[k].shape[-1] for k in names]


def score_layers(x_id_LxNxD, x_ood_LxNxD, y_id_NxK, y_ood_NxK, lambdas_A) -> dict:
  """R^2 {'id', 'ood': [L, A, K]} of probes fitted on the first half of the ID tasks, scored on
  the second half and on the held-out tasks; vmapped over layers."""
  half = y_id_NxK.shape[0] // 2

  def one_layer(x_id_NxD, x_ood_NxD):
    evals = {"id": (x_id_NxD[half:], y_id_NxK[half:]), "ood": (x_ood_NxD, y_ood_NxK)}
    return fit_and_score(x_id_NxD[:half], y_id_NxK[:half], evals, lambdas_A)

  return jax.vmap(one_layer)(x_id_LxNxD, x_ood_LxNxD)


def probe_run(state: RunState, bits_T: jax.Array, cfg: ml_collections.ConfigDict) -> dict:
  """Probe R^2 of one run: {'<target>/<split>': [L, A]} (layers in stack order, A lambdas), each
  the mean R^2 over the target's columns."""
  data, names, sizes = probe_data(state, bits_T, cfg)
  r2 = score_layers(*data, jnp.asarray(cfg.probe.lambdas, jnp.float32))
  has_ood = state.task["split"].n_ood > 0
  out = {}
  for split_name, r2_LxAxK in r2.items():
    cols = jnp.split(r2_LxAxK, np.cumsum(sizes)[:-1].tolist(), axis=-1)
    for name, col in zip(names, cols, strict=True):
      value_LxA = jnp.nanmean(col, axis=-1)
      if split_name == "ood":  # a split without held-out tasks has no OOD score
        value_LxA = jnp.where(has_ood, value_LxA, jnp.nan)
      out[f"{name}/{split_name}"] = value_LxA
  return out


@cache_by_config
def probe_one(cfg: ml_collections.ConfigDict):
  """probe_run of cfg, one object per config (the engine's pass compiles it once per process)."""
  return functools.partial(probe_run, cfg=cfg)


def make_probe(cfg: ml_collections.ConfigDict):
  """jit(vmap over runs) of probe_run: (states, bits_T) -> {'<target>/<split>': [R, L, A]}."""
  validate(cfg)
  return jax.jit(jax.vmap(functools.partial(probe_run, cfg=cfg), in_axes=(0, None)))


def rows(result: dict, names: tuple[str, ...], cfg: ml_collections.ConfigDict, step: int,
         grid: list[dict]) -> list[dict]:
  """probes.jsonl rows, one per run and lambda: '<target>/<layer>/<split>_r2', and for each target
  the best student layer (highest ID probe R^2; after the first if probe.skip_first) as
  '<target>/best_layer', '<target>/best/<split>_r2'."""
  result = {k: np.asarray(v) for k, v in result.items()}
  skip = 2 if cfg.probe.skip_first and len(names) > 2 else 1  # names[0] is INPUT_LAYER
  candidate = np.arange(len(names)) >= skip
  out = []
  for r, run in enumerate(grid):
    for a, lam in enumerate(cfg.probe.lambdas):
      row = {"step": int(step), **run, "lambda": float(lam)}
      for key, value in result.items():
        target, split = key.split("/")
        row.update({f"{target}/{layer}/{split}_r2": float(value[r, l, a])
                    for l, layer in enumerate(names)})
      for target in dict.fromkeys(k.split("/")[0] for k in result):  # not a set: row bytes
        id_r2 = np.nan_to_num(result[f"{target}/id"][r, :, a], nan=-np.inf)
        best = int(np.argmax(np.where(candidate, id_r2, -np.inf)))
        row[f"{target}/best_layer"] = names[best]
        for split in SPLITS:
          row[f"{target}/best/{split}_r2"] = float(result[f"{target}/{split}"][r, best, a])
      out.append(row)
  return out
