"""Linear probes from every feature layer to each slot's shape and colour, on the model's own
sampling trajectory (step 0 is pure noise, t = 1), never on forward-noised ground truth.

One ridge solve (training/ridge.py) per (sampler step, layer, fit set) predicts the
one-hot codes of all slots and attributes at once; a (slot, attribute) is decoded by the argmax
over its block. Fit sets: `all`, num_fit prompts of the run's training combinations; `fixed`,
num_fit prompts of a fixed number (probe.control_combos) of them, so probe data does not grow
with coverage. Scored on num_eval held-out prompts (`ood`); `id` scores the `all` probe fitted on
half its set on the other half (for choosing a layer without looking at held-out data).
"""


import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from compgen_jax import checks, rng
from compgen_jax import workdir as workdir_lib
from compgen_jax.images import sampler, scenes, split
from compgen_jax.images import train as train_lib
from compgen_jax.training import passes as engine_passes
from compgen_jax.training import ridge
from compgen_jax.training.cache import cache_by_config
from compgen_jax.types import ConfigError

VARIANTS = ("all", "fixed")


def validate(cfg: ml_collections.ConfigDict) -> None:
  p = cfg.probe
  checks.integer("probe.num_fit", p.num_fit, low=4, multiple_of=2)
  checks.integer("probe.num_eval", p.num_eval, low=1)
  checks.numbers("probe.lambdas", p.lambdas, low=0, low_open=True)
  steps = tuple(p.steps)
  if not steps or any(not 0 <= s < cfg.sampler.num_steps for s in steps):
    raise ConfigError("probe.steps", f"sampler steps in [0, sampler.num_steps = "
                      f"{cfg.sampler.num_steps}), at least one, got {steps}")
  checks.integer("probe.control_combos", p.control_combos, low=1)


def one_hot_targets(shapes_NxK, colours_NxK, geo: scenes.Geometry):
  """[N, K * (S + C)]: per slot, one-hot shape then one-hot colour."""
  parts = [jnp.concatenate([jax.nn.one_hot(shapes_NxK[:, k], geo.num_shapes),
                            jax.nn.one_hot(colours_NxK[:, k], geo.num_colours)], -1)
           for k in range(geo.num_slots)]
  return jnp.concatenate(parts, -1)


def decode(pred_NxY, geo: scenes.Geometry):
  """Predicted one-hot codes -> (shapes, colours) [N, K] by the argmax of each block."""
  S, C = geo.num_shapes, geo.num_colours
  blocks = pred_NxY.reshape(pred_NxY.shape[0], geo.num_slots, S + C)
  return jnp.argmax(blocks[..., :S], -1), jnp.argmax(blocks[..., S:], -1)


def scores(pred_NxY, shapes_NxK, colours_NxK, geo: scenes.Geometry):
  """Accuracy [K, 2] per (slot, attribute), and recall [K, 2, V] per concept (NaN: absent)."""
  shape_hat, colour_hat = decode(pred_NxY, geo)
  V = max(geo.num_shapes, geo.num_colours)
  right = jnp.stack([shape_hat == shapes_NxK, colour_hat == colours_NxK], -1)  # [N, K, 2]
  truth = jnp.stack([shapes_NxK, colours_NxK], -1)
  member = jax.nn.one_hot(truth, V)  # [N, K, 2, V]
  count = member.sum(0)
  recall = jnp.where(count > 0, (member * right[..., None]).sum(0) / jnp.maximum(count, 1),
                     jnp.nan)
  return right.mean(0), recall


def _sets(sp: split.Split, p: ml_collections.ConfigDict):
  """(name, stream, index list, count, size) of the fit sets and the held-out evaluation set."""
  return [("all", "test", sp.train_idx, sp.n_train, p.num_fit),
          ("fixed", "data", sp.train_idx, jnp.minimum(sp.n_train, p.control_combos), p.num_fit),
          ("ood", "ood", sp.ood_idx, sp.n_ood, p.num_eval)]


def probe_inputs(state: train_lib.ImageState, cfg: ml_collections.ConfigDict):
  """One run's prompts (fit sets then held-out, from its `probe` stream) and the conditional
  pass's features on their sampling trajectories: (features, a tuple over layers of
  [P, N, D_l]; shapes [N, K]; colours [N, K])."""
  geo = scenes.geometry(cfg.scene)
  key = rng.stream(train_lib.run_key(state), "probe")
  drawn = [train_lib.draw_scenes(rng.stream(key, stream), idx, n, num, geo)[:2]
           for _, stream, idx, n, num in _sets(state.split, cfg.probe)]
  shapes = jnp.concatenate([d[0] for d in drawn])
  colours = jnp.concatenate([d[1] for d in drawn])
  _, feats = sampler.sample(state.ema, rng.stream(key, "train"), shapes, colours, cfg, geo,
                            keep_steps=tuple(cfg.probe.steps))
  return feats, shapes, colours


def fit_and_score(x_NxD, shapes_NxK, colours_NxK, cfg: ml_collections.ConfigDict) -> dict:
  """Probes of one (run, step, layer): {'ood/<variant>': acc [A, K, 2], 'id/all': acc [A, K, 2],
  'concept/all': recall [A, K, 2, V]}."""
  geo, p = scenes.geometry(cfg.scene), cfg.probe
  y = one_hot_targets(shapes_NxK, colours_NxK, geo)
  bounds = np.cumsum([0, p.num_fit, p.num_fit, p.num_eval])
  part = lambda a, i: a[bounds[i]:bounds[i + 1]]
  lambdas = jnp.asarray(p.lambdas, jnp.float32)
  truth = (part(shapes_NxK, 2), part(colours_NxK, 2))
  out = {}
  for v, name in enumerate(VARIANTS):
    w, b = ridge.ridge_fit(part(x_NxD, v), part(y, v), lambdas)
    pred = ridge.ridge_predict(w, b, part(x_NxD, 2))  # [A, N_eval, Y]
    acc, recall = jax.vmap(lambda q: scores(q, *truth, geo))(pred)
    out[f"ood/{name}"] = acc
    if name == "all":
      out["concept/all"] = recall
  half = p.num_fit // 2
  x_fit, y_fit = part(x_NxD, 0), part(y, 0)
  w, b = ridge.ridge_fit(x_fit[:half], y_fit[:half], lambdas)
  pred = ridge.ridge_predict(w, b, x_fit[half:])
  fit_truth = (part(shapes_NxK, 0)[half:], part(colours_NxK, 0)[half:])
  out["id/all"] = jax.vmap(lambda q: scores(q, *fit_truth, geo)[0])(pred)
  return out


def _fit_all(feats, shapes_RxNxK, colours_RxNxK, cfg):
  """fit_and_score over runs, steps and layers -> {name: [R, P, L, ...]}. The solves run one at
  a time under lax.map: jaxlib's batched CPU eigh (ParallelBatchMap), which vmap would produce,
  was seen to deadlock intermittently on the 2-core machine."""
  per_layer = []
  for f_RxPxNxD in feats:
    R, P = f_RxPxNxD.shape[:2]
    rep = lambda a, P=P: jnp.repeat(a, P, axis=0)
    out = jax.lax.map(lambda args: fit_and_score(*args, cfg),
                      (f_RxPxNxD.reshape(R * P, *f_RxPxNxD.shape[2:]), rep(shapes_RxNxK),
                       rep(colours_RxNxK)))
    per_layer.append(jax.tree.map(lambda a, R=R, P=P: a.reshape(R, P, *a.shape[1:]), out))
  return {k: jnp.stack([r[k] for r in per_layer], 2) for k in per_layer[0]}


@cache_by_config
def inputs_one(cfg: ml_collections.ConfigDict):
  """One run's probe_inputs as {features, shapes, colours}: the engine vmaps it over runs."""
  def inputs(state):
    feats, shapes, colours = probe_inputs(state, cfg)
    return {"features": feats, "shapes": shapes, "colours": colours}
  return inputs


@cache_by_config
def fits(cfg: ml_collections.ConfigDict):
  """Every run's inputs_one outputs -> {'ood/<variant>', 'id/all': acc [R, P, L, A, K, 2],
  'concept/all': recall [R, P, L, A, K, 2, V]} over runs, kept sampler steps, layers and
  lambdas: the ridge solves, over every run together (_fit_all)."""
  return lambda out: _fit_all(out["features"], out["shapes"], out["colours"], cfg)


def best_layer(id_acc_L: np.ndarray) -> int:
  """The layer with the best ID probe accuracy, after the first when there are several: the
  first layer sees the condition through one linear map, so it decodes it trivially."""
  candidates = np.arange(len(id_acc_L)) >= (1 if len(id_acc_L) > 1 else 0)
  return int(np.argmax(np.where(candidates, np.nan_to_num(id_acc_L, nan=-1.0), -np.inf)))


def rows(result: dict, grid: list[dict], step: int, cfg: ml_collections.ConfigDict) -> list[dict]:
  """probes.jsonl rows, one per run and lambda: per sampler step and layer the mean accuracy
  ('probe/<variant>/step<s>/layer<l>/ood_acc'), and at the best layer (by ID accuracy at step 0)
  'probe/<variant>/t1/ood_acc' (t = 1, pure noise) and 'probe/<variant>/traj/ood_acc' (mean over
  the kept steps); per concept 'probe_concept/s<k>_<attr><v>/recall' (best layer, t = 1)."""
  result = jax.tree.map(np.asarray, result)
  geo = scenes.geometry(cfg.scene)
  out = []
  for r, run in enumerate(grid):
    for a, lam in enumerate(cfg.probe.lambdas):
      row = {"step": int(step), **run, "lambda": float(lam)}
      id_acc = result["id/all"][r, :, :, a].mean((-2, -1))  # [P, L]
      best = best_layer(id_acc[0])
      row["probe/best_layer"] = best
      for variant in VARIANTS:
        acc = result[f"ood/{variant}"][r, :, :, a].mean((-2, -1))  # [P, L]
        for i, s in enumerate(cfg.probe.steps):
          row.update({f"probe/{variant}/step{s}/layer{l}/ood_acc": float(acc[i, l])
                      for l in range(acc.shape[1])})
        row[f"probe/{variant}/t1/ood_acc"] = float(acc[0, best])
        row[f"probe/{variant}/traj/ood_acc"] = float(acc[:, best].mean())
        per_attr = result[f"ood/{variant}"][r, 0, best, a]  # [K, 2]
        row[f"probe/{variant}/t1/shape_acc"] = float(per_attr[:, 0].mean())
        row[f"probe/{variant}/t1/colour_acc"] = float(per_attr[:, 1].mean())
      row["probe/all/t1/id_acc"] = float(id_acc[0, best])
      recall = result["concept/all"][r, 0, best, a]  # [K, 2, V]
      for k in range(geo.num_slots):
        for j, (attr, n) in enumerate((("shape", geo.num_shapes), ("colour", geo.num_colours))):
          row.update({f"probe_concept/s{k}_{attr}{v}/recall": float(recall[k, j, v])
                      for v in range(n)})
      out.append(row)
  return out


def probe_workdir(cfg: ml_collections.ConfigDict, workdir: str, step: int | None = None,
                  every: bool = False) -> list[dict]:
  """Probes every run on the selected checkpoints (training.passes.select_steps: the latest by
  default; `every`: all), replacing each step's rows of probes.jsonl (training.passes.write_pass);
  returns them."""
  validate(cfg)
  grid = train_lib.run_info(cfg, train_lib.run_grid(cfg))
  return engine_passes.over_checkpoints(
      workdir, train_lib.init_one(cfg), train_lib.abstract_inputs(cfg, train_lib.run_grid(cfg)),
      grid, {"inputs": inputs_one(cfg)}, workdir_lib.PROBE_FILE, step, every,
      rows=lambda s, result, state: rows(result, grid, s, cfg), placement="one_device",
      then=fits(cfg))
