"""Evaluator registry: name -> (state, bits_T, cfg) -> {metric: scalar}, for one run.

This is the `evaluate(state, key) -> metrics` of the design with the key made part of the state:
each evaluator draws its tasks and inputs from a fixed named stream of the run key
(`rng.stream(run_key(state), <stream>)`, never the training stream), so every evaluation of a run
sees the same tasks, numbers are comparable over steps, and a standalone pass over a checkpoint
reproduces the in-training numbers exactly. bits_T (the task table's bitmasks) is shared by runs.

Metrics are those of the family's `loss` (regression: loss, r2; classification: loss, acc per
step, acc_all per whole trajectory), prefixed by the evaluator's split:
  id           training tasks, fresh draws (`test` stream): id/<m>
  ood          held-out tasks (`ood` stream), compositional generalization: ood/<m>
  ood_hotness  held-out tasks with exactly h modules (h = 1..K) and random subsets of h = K+1 ..
               K+hotness_above modules (`ood_hotness` stream): ood_h<h>/<m>; hyperteacher only
  r2_quantiles per-task R^2 quantiles of the id and ood draws: id/r2_q<pct>, ood/r2_q<pct>

The `evals` config section enables evaluators for training, one entry per name with its settings:
`every` (steps between evaluations, a multiple of train.chunk_size; 0 = the final step only),
`num_tasks` (tasks drawn per evaluation), and the evaluator's own (SETTINGS). An entry lists only
what differs from `default_settings(name)`.
"""

import functools

import jax
import jax.numpy as jnp
import ml_collections

from compgen_jax import checks, rng
from compgen_jax.scaling import batches
from compgen_jax.scaling import state as run_state
from compgen_jax.scaling.state import RunState
from compgen_jax.tasks import losses
from compgen_jax.tasks import registry as families
from compgen_jax.types import ConfigError

# Settings every evaluator has, and each one's own; `default_settings` merges them.
COMMON = {"every": 0, "num_tasks": 1024}
SETTINGS = {"id": {}, "ood": {}, "ood_hotness": {"hotness_above": 2},
            "r2_quantiles": {"quantiles": (0.1, 0.25, 0.5, 0.75, 0.9)}}


def default_settings(name: str) -> ml_collections.ConfigDict:
  """Every setting of evaluator `name` with its default."""
  return ml_collections.ConfigDict({**COMMON, **SETTINGS[name]})


def _draw(state: RunState, bits_T, cfg, stream: str, which: str, num_tasks: int):
  """The evaluation batch of `which` ('train' or 'ood') tasks and the number of such tasks."""
  split = state.task["split"]
  idx_T, n = (split.train_idx, split.n_train) if which == "train" else (split.ood_idx, split.n_ood)
  key = rng.stream(run_state.run_key(state), stream)
  batch = batches.draw_batch(state, key, idx_T, jnp.maximum(n, 1), num_tasks, bits_T, cfg)
  return batch, n


def _metrics(state: RunState, batch, count, cfg) -> dict:
  pred, _ = batches.predict(state.params, state, batch, cfg)
  _, metrics = families.get(cfg.task.family).loss(pred, batch)
  # No tasks of this kind (e.g. a split without held-out tasks): no score.
  return {k: jnp.where(count > 0, v, jnp.nan) for k, v in metrics.items()}


def _evaluate_on(state: RunState, bits_T, cfg, stream: str, which: str, num_tasks: int) -> dict:
  batch, n = _draw(state, bits_T, cfg, stream, which, num_tasks)
  return _metrics(state, batch, n, cfg)


def evaluate_id(state, bits_T, cfg, settings) -> dict:
  """In-distribution: fresh draws of training tasks from the `test` stream."""
  metrics = _evaluate_on(state, bits_T, cfg, "test", "train", settings.num_tasks)
  return {f"id/{k}": v for k, v in metrics.items()}


def evaluate_ood(state, bits_T, cfg, settings) -> dict:
  """Held-out combinations (compositional generalization) from the `ood` stream."""
  metrics = _evaluate_on(state, bits_T, cfg, "ood", "ood", settings.num_tasks)
  return {f"ood/{k}": v for k, v in metrics.items()}


def hotness_indices(key: jax.Array, idx_T: jax.Array, n: jax.Array, bits_T: jax.Array, h: int,
                    num_tasks: int) -> tuple[jax.Array, jax.Array]:
  """`num_tasks` uniform draws [B] among the first n entries of idx_T with exactly h modules, and
  how many such entries there are (draws are meaningless when it is 0)."""
  hot_T = jax.lax.population_count(bits_T[idx_T])
  ok_T = (jnp.arange(idx_T.shape[0]) < n) & (hot_T == h)
  cum_T = jnp.cumsum(ok_T.astype(jnp.int32))
  count = cum_T[-1]
  u_B = jax.random.randint(key, (num_tasks,), 0, jnp.maximum(count, 1))
  return idx_T[jnp.searchsorted(cum_T, u_B, side="right")], count


def random_khot(key: jax.Array, num_tasks: int, num_modules: int, h: int) -> jax.Array:
  """[B, M] k-hot rows of uniformly random subsets of exactly h modules."""
  _, idx_BxH = jax.lax.top_k(jax.random.uniform(key, (num_tasks, num_modules)), h)
  return jax.nn.one_hot(idx_BxH, num_modules).sum(1)


def hotness_levels(cfg: ml_collections.ConfigDict, hotness_above: int) -> tuple[int, ...]:
  """Hotness levels of ood_hotness: 1..K held out, K+1..K+hotness_above random (capped at M)."""
  top = min(cfg.task.num_modules, cfg.task.max_hotness + int(hotness_above))
  return tuple(range(1, top + 1))


def evaluate_ood_hotness(state, bits_T, cfg, settings) -> dict:
  """OOD metrics by number of active modules h: held-out tasks (h <= K), any subset (h > K)."""
  key = rng.stream(run_state.run_key(state), "ood_hotness")
  split, B = state.task["split"], settings.num_tasks
  out = {}
  for h in hotness_levels(cfg, settings.hotness_above):
    key_tasks, key_data = jax.random.split(jax.random.fold_in(key, h))
    if h <= cfg.task.max_hotness:
      idx_B, count = hotness_indices(key_tasks, split.ood_idx, split.n_ood, bits_T, h, B)
      batch = batches.batch_for_bits(state, bits_T[idx_B], key_data, cfg)
    else:  # more modules than any training task: every such subset is unseen
      khot_BxM = random_khot(key_tasks, B, cfg.task.num_modules, h)
      batch = batches.batch_for_khot(state, khot_BxM, key_data, cfg)
      count = jnp.asarray(B)
    out.update({f"ood_h{h}/{k}": v for k, v in _metrics(state, batch, count, cfg).items()})
  return out


def quantile_name(q: float) -> str:
  return f"r2_q{round(100 * float(q)):02d}"


def evaluate_r2_quantiles(state, bits_T, cfg, settings) -> dict:
  """Quantiles of per-task R^2 over the id and ood evaluators' tasks (the same draws when the
  num_tasks are equal)."""
  qs = tuple(float(q) for q in settings.quantiles)
  out = {}
  for prefix, stream, which in (("id", "test", "train"), ("ood", "ood", "ood")):
    batch, n = _draw(state, bits_T, cfg, stream, which, settings.num_tasks)
    pred, _ = batches.predict(state.params, state, batch, cfg)
    values = jnp.quantile(losses.r2_per_task(pred, batch.y), jnp.asarray(qs))
    out.update({f"{prefix}/{quantile_name(q)}": jnp.where(n > 0, values[i], jnp.nan)
                for i, q in enumerate(qs)})
  return out


REGISTRY = {"id": evaluate_id, "ood": evaluate_ood, "ood_hotness": evaluate_ood_hotness,
            "r2_quantiles": evaluate_r2_quantiles}


def _require_module_weights(cfg, name: str) -> None:
  if not families.get(cfg.task.family).module_weights:
    raise ConfigError(f"evals.{name}", f"{name!r} needs a family whose tasks may combine more "
                      f"than K modules (the hyperteacher), not {cfg.task.family!r}")


def _require_regression(cfg, name: str) -> None:
  if families.get(cfg.task.family).loss is not losses.regression_loss:
    raise ConfigError(f"evals.{name}", f"{name!r} needs a regression family (per-task R^2); "
                      f"{cfg.task.family!r} is not one")


REQUIREMENTS = {"ood_hotness": _require_module_weights, "r2_quantiles": _require_regression}


def _given(cfg: ml_collections.ConfigDict, names=None) -> dict[str, dict]:
  """The settings the config gives each evaluator of `names` (default: those it enables), before
  defaults are filled in."""
  if "evals" not in cfg:
    raise ConfigError("evals", "missing: the config predates the evals section (written by an "
                      "older version); retrain, or add evals.<name> entries")
  names = tuple(cfg.evals) if names is None else tuple(names)
  return {name: dict(cfg.evals.get(name) or {}) for name in names}


def evals_config(cfg: ml_collections.ConfigDict, names=None) -> ml_collections.ConfigDict:
  """{name: settings} of the evaluators cfg enables (or of `names`), every setting filled in:
  what an entry omits, or an evaluator without one, takes default_settings."""
  return ml_collections.ConfigDict({name: {**COMMON, **SETTINGS[name], **entry}
                                    for name, entry in _given(cfg, names).items()})


def _check_settings(cfg, name: str, s: ml_collections.ConfigDict) -> None:
  field, chunk = f"evals.{name}", cfg.train.chunk_size
  if not isinstance(s.every, int) or s.every < 0 or s.every % chunk:
    raise ConfigError(f"{field}.every", f"must be a non-negative multiple of train.chunk_size "
                      f"({chunk}; 0 = only at the final step), got {s.every}")
  checks.integer(f"{field}.num_tasks", s.num_tasks, low=1)
  if "hotness_above" in s:
    checks.integer(f"{field}.hotness_above", s.hotness_above, low=0)
  if "quantiles" in s:
    checks.numbers(f"{field}.quantiles", s.quantiles, 0, 1)


def validate(cfg: ml_collections.ConfigDict, names=None) -> None:
  """The configured evaluators (or `names`): an unknown name or setting, a bad value, or an
  evaluator the task family has no meaning for raise ConfigError naming the field
  (`evals.<name>[.<setting>]`)."""
  given = _given(cfg, names)
  for name, entry in given.items():
    checks.choice(f"evals.{name}", name, REGISTRY)
    for setting in sorted(entry):
      checks.choice(f"evals.{name}.{setting}", setting, default_settings(name))
    REQUIREMENTS.get(name, lambda cfg, name: None)(cfg, name)
  for name, settings in evals_config(cfg, tuple(given)).items():
    _check_settings(cfg, name, settings)


def applicable(cfg: ml_collections.ConfigDict) -> tuple[str, ...]:
  """Every registered evaluator that is defined for cfg's task family."""
  out = []
  for name in REGISTRY:
    try:
      REQUIREMENTS.get(name, lambda cfg, name: None)(cfg, name)
    except ConfigError:
      continue
    out.append(name)
  return tuple(out)


def due(cfg: ml_collections.ConfigDict, step: int) -> tuple[str, ...]:
  """The configured evaluators to run after `step`: those whose `every` divides it, and all of
  them at the final step (train.num_steps)."""
  return tuple(name for name, s in evals_config(cfg).items()
               if step == cfg.train.num_steps or (s.every and step % s.every == 0))


def one_run(cfg: ml_collections.ConfigDict, names=None) -> dict:
  """name -> (state, bits_T) -> {metric: scalar} of ONE run, for the named evaluators (default:
  those in cfg.evals), each with its settings from evals_config; the engine gives each its own
  jit(vmap over runs) (training.loop.make_evaluate), so its numbers never depend on which other
  evaluators run with it (in training or standalone)."""
  validate(cfg, names)
  return {name: functools.partial(REGISTRY[name], cfg=cfg, settings=s)
          for name, s in evals_config(cfg, names).items()}
