"""Config validation, the set of models an experiment run needs, and training-or-restoring them.

All from-scratch models (tasks x seeds) train in one vmapped program. With `init=independent`
(the authors' code) every task of a seed draws its own initial parameters; with `init=shared`
they all start from one draw per seed, which weight averaging and task arithmetic need. The
fine-tuned experts (for the task-arithmetic check) start from each seed's identity model.
"""

import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from compgen_jax import checkpointing, rng
from compgen_jax.composition import letters, training
from compgen_jax.composition.lm import POSITIONS, Model, make_lm
from compgen_jax.types import ConfigError, PyTree

EXPERIMENTS = ("substitution", "length", "baselines", "background", "k_experts", "violations",
               "arithmetic")
INITS = ("independent", "shared")


def experiments(cfg) -> list[str]:
  return [e.strip() for e in cfg.experiments.split(",") if e.strip()]


def pairs(cfg) -> list[list[str]]:
  return [letters.parse_subs(p) for p in cfg.compose.pairs.split(";") if p.strip()]


def floats(text: str) -> list[float]:
  return [float(v) for v in text.split(",") if v.strip()]


def pair_lambdas(cfg, num_experts: int) -> np.ndarray:
  lam = floats(cfg.compose.lambdas)
  return np.asarray(lam if lam else [1.0] * num_experts, np.float32)


def _check(ok: bool, field: str, message: str) -> None:
  if not ok:
    raise ConfigError(field, message)


def _subs(cfg, field: str, text: str, count: int | None = None) -> list[str]:
  try:
    subs = letters.parse_subs(text)
  except ValueError as e:
    raise ConfigError(field, str(e)) from None
  _check(count is None or len(subs) == count, field, f"needs exactly {count} substitutions")
  return subs


def validate(cfg: ml_collections.ConfigDict) -> None:
  """Raises ConfigError (naming the field and the allowed values) before anything compiles."""
  names = experiments(cfg)
  bad = [n for n in names if n not in EXPERIMENTS]
  _check(names and not bad, "experiments", f"unknown {bad}; allowed: {', '.join(EXPERIMENTS)}")
  _check(cfg.num_seeds >= 1, "num_seeds", "must be >= 1")
  _check(cfg.init in INITS, "init", f"{cfg.init!r} not in {INITS}")
  m, d = cfg.model, cfg.data
  _check(m.positions in POSITIONS, "model.positions", f"{m.positions!r} not in {POSITIONS}")
  _check(m.width >= 1 and m.num_heads >= 1 and m.width % m.num_heads == 0, "model.num_heads",
         f"must divide model.width={m.width}")
  _check(m.positions != "rotary" or (m.width // m.num_heads) % 2 == 0, "model.width",
         "rotary positions need an even head dimension (width / num_heads)")
  _check(m.num_layers >= 1 and m.mlp_ratio >= 1, "model.num_layers", "layers, mlp_ratio >= 1")
  _check(d.layout in letters.LAYOUTS, "data.layout", f"{d.layout!r} not in {letters.LAYOUTS}")
  _check(1 <= d.train_min_len <= d.train_len <= d.length_max, "data.train_len",
         f"need 1 <= train_min_len <= train_len <= length_max={d.length_max}")
  _check(m.positions != "learned" or 2 * d.length_max + 3 <= m.max_len, "data.length_max",
         f"learned positions allow sequences of model.max_len={m.max_len} tokens: "
         f"length_max <= {(m.max_len - 3) // 2}")
  _check(d.num_train >= 0 and d.test_size >= 1 and d.length_per_len >= 1, "data.test_size",
         "num_train >= 0, test_size >= 1, length_per_len >= 1")
  for name in ("train", "finetune"):
    t = cfg[name]
    _check(t.steps >= 1 and t.batch_size >= 1 and t.lr > 0, f"{name}.steps",
           "steps, batch_size >= 1 and lr > 0")
    _check(t.steps % min(t.chunk_steps, t.steps) == 0 and t.chunk_steps >= 1,
           f"{name}.chunk_steps", f"must divide {name}.steps={t.steps}")
  c = cfg.compose
  ps = [_subs(cfg, "compose.pairs", p) for p in c.pairs.split(";") if p.strip()]
  _check(len(ps) >= 1, "compose.pairs", "needs at least one pair, e.g. 'A>B,C>D'")
  _check(not any(letters.conflicting(p) for p in ps), "compose.pairs",
         "two experts of a pair rewrite the same letter ('apply both' is undefined; that case "
         "is compose.overlap)")
  lam = floats(c.lambdas)
  _check(not lam or all(len(p) == len(lam) for p in ps), "compose.lambdas",
         f"has {len(lam)} weights but the pairs have {[len(p) for p in ps]} experts")
  _check(all(v > 0 for v in floats(c.ta_lambdas)), "compose.ta_lambdas", "positive floats")
  k_subs = _subs(cfg, "compose.k_experts", c.k_experts)
  _check(1 <= c.k_max <= len(k_subs), "compose.k_max", f"must be in 1..{len(k_subs)}")
  srcs, dsts = [s[0] for s in k_subs[:c.k_max]], [s[2] for s in k_subs[:c.k_max]]
  _check(len(set(srcs)) == len(srcs) and not set(srcs) & set(dsts), "compose.k_experts",
         "must be disjoint: distinct source letters, no target that is another's source")
  _subs(cfg, "compose.overlap", c.overlap, 2)
  _subs(cfg, "compose.chain", c.chain, 2)
  _check(c.kl_threshold > 0 and c.temperature > 0 and c.eval_batch >= 1, "compose.kl_threshold",
         "kl_threshold, temperature > 0 and eval_batch >= 1")
  _check(0 <= c.ortho_norm_floor < 1, "compose.ortho_norm_floor", "must be in [0, 1)")
  if "arithmetic" in names:
    for r in cfg.finetune.regimes.split(","):
      training.trainable_mask({"head": {}}, r.strip(), m.num_layers)  # raises on a bad regime
    _check(not m.tie_head, "model.tie_head", "the arithmetic experiment needs an untied head")


def scratch_tasks(cfg) -> list[str]:
  """Task names trained from scratch for the enabled experiments (ordered, no repeats)."""
  names, ps, c = experiments(cfg), pairs(cfg), cfg.compose
  tasks = ["identity"]
  if {"substitution", "length", "baselines", "background"} & set(names):
    tasks += [s for p in ps for s in p]
  if {"baselines", "length"} & set(names):
    tasks += [letters.joint_name(p) for p in ps]
  if "background" in names:
    tasks += [letters.mixture_name(p) for p in ps]
  if "k_experts" in names:
    tasks += letters.parse_subs(c.k_experts)[:c.k_max]
  if "violations" in names:
    tasks += letters.parse_subs(c.overlap) + letters.parse_subs(c.chain)
  return list(dict.fromkeys(tasks))


def finetune_runs(cfg) -> list[tuple[str, str]]:
  """(expert, regime) pairs fine-tuned from the identity model (the first pair's experts)."""
  if "arithmetic" not in experiments(cfg):
    return []
  return [(e, r.strip()) for r in cfg.finetune.regimes.split(",") for e in pairs(cfg)[0]]


class Zoo(NamedTuple):
  model: Model
  params: dict            # task name -> params stacked over seeds [S, ...]
  finetuned: dict         # (expert, regime) -> params [S, ...]
  seed_keys: jax.Array    # [S] typed keys


def _train_or_restore(workdir: str, group: str, init_params_R: PyTree, train_fn) -> PyTree:
  ckpt_dir = os.path.join(workdir, "checkpoints", group)
  if checkpointing.available_steps(ckpt_dir):
    abstract = jax.eval_shape(lambda: {"params": init_params_R})
    _, state = checkpointing.restore(ckpt_dir, abstract)
    print(f"[{group}] restored trained models from {ckpt_dir}")
    return state["params"]
  params_R = train_fn()
  checkpointing.save(checkpointing.manager(ckpt_dir), 1, {"params": params_R})
  return params_R


def _split(params_R: PyTree, names: list, num_seeds: int) -> dict:
  """Task-major [len(names) * S, ...] -> {name: [S, ...]}."""
  return {n: jax.tree.map(lambda a, i=i: a[i * num_seeds:(i + 1) * num_seeds], params_R)
          for i, n in enumerate(names)}


def initial_params(model: Model, seed_keys_S: jax.Array, tasks: list[str], init: str) -> PyTree:
  """Task-major [len(tasks) * S, ...] initial parameters: one draw per seed ('shared', stream
  'student') or one per task and seed ('independent', stream 'init/<task>')."""
  if init == "shared":
    init_S = jax.vmap(lambda k: model.init(rng.stream(k, "student")))(seed_keys_S)
    return jax.tree.map(lambda a: jnp.concatenate([a] * len(tasks)), init_S)
  keys_R = jnp.concatenate([jax.vmap(lambda k, t=t: rng.stream(k, f"init/{t}"))(seed_keys_S)
                            for t in tasks])
  return jax.vmap(model.init)(keys_R)


def build_zoo(cfg, workdir: str) -> Zoo:
  """Trains (or restores from workdir/checkpoints) every model the experiments need."""
  model = make_lm(cfg.model, letters.VOCAB_SIZE)
  s = cfg.num_seeds
  seed_keys = jax.vmap(lambda i: rng.run_key(cfg.seed, i))(jnp.arange(s))
  metrics_path = os.path.join(workdir, "metrics.jsonl")
  tasks = scratch_tasks(cfg)
  init_R = initial_params(model, seed_keys, tasks, cfg.init)

  def train_scratch():
    keys = jnp.concatenate([jax.vmap(lambda k, t=t: rng.stream(k, f"task/{t}"))(seed_keys)
                            for t in tasks])
    masks = jax.vmap(lambda p: training.trainable_mask(p, "all", cfg.model.num_layers))(init_R)
    info = [{"task": t, "seed": i} for t in tasks for i in range(s)]
    print(f"training {len(tasks)} models x {s} seeds from scratch: {', '.join(tasks)}")
    per_run = [t for t in tasks for _ in range(s)]
    return training.train(model, init_R, training.make_runs(keys, per_run, cfg, masks), cfg,
                          cfg.train, info, metrics_path, "scratch")

  params = _split(_train_or_restore(workdir, "scratch", init_R, train_scratch), tasks, s)
  runs = finetune_runs(cfg)
  finetuned = {}
  if runs:
    ft_init = jax.tree.map(lambda a: jnp.concatenate([a] * len(runs)), params["identity"])

    def train_finetune():
      keys = jnp.concatenate([jax.vmap(lambda k, e=e: rng.stream(k, f"finetune/{e}"))(seed_keys)
                              for e, _ in runs])
      masks = jax.tree.map(lambda *m: jnp.concatenate(m), *[
          jax.vmap(lambda p, r=r: training.trainable_mask(p, r, cfg.model.num_layers))(
              params["identity"]) for _, r in runs])
      info = [{"task": e, "regime": r, "seed": i} for e, r in runs for i in range(s)]
      print(f"fine-tuning {len(runs)} (expert, regime) runs x {s} seeds from the identity model")
      per_run = [e for e, _ in runs for _ in range(s)]
      return training.train(model, ft_init, training.make_runs(keys, per_run, cfg, masks), cfg,
                            cfg.finetune, info, metrics_path, "finetune")

    finetuned = _split(_train_or_restore(workdir, "finetune", ft_init, train_finetune), runs, s)
  return Zoo(model, params, finetuned, seed_keys)
