"""Validation of a letters config (configs/letters.py) before anything compiles."""

import ml_collections

from compgen_jax import checks
from compgen_jax.composition import spec
from compgen_jax.composition.compose import OPERATORS
from compgen_jax.letters import data
from compgen_jax.lm.transformer import INITS as MODEL_INITS
from compgen_jax.lm.transformer import POSITIONS
from compgen_jax.types import ConfigError

INITS = ("independent", "shared")


# May differ from the trained config in an evaluate-only pass (letters/standalone.py; the task
# lists are checked against the checkpoints).
EVALUATION_FIELDS = ("preset", "experiments", "compose", "finetune.regimes", "data.test_size",
                     "data.length_max", "data.length_per_len", "train.progress")

def _check(ok: bool, field: str, message: str) -> None:
  if not ok:
    raise ConfigError(field, message)


def _subs(field: str, subs, count: int | None = None) -> list[str]:
  try:
    subs = data.parse_subs(subs)
  except ValueError as e:
    raise ConfigError(field, str(e)) from None
  _check(count is None or len(subs) == count, field, f"needs exactly {count} substitutions")
  return subs


def _validate_training(name: str, t, o) -> None:
  for field in ("num_steps", "batch_size", "chunk_size"):
    checks.integer(f"{name}.{field}", t[field], low=1)
  _check(t.num_steps % min(t.chunk_size, t.num_steps) == 0, f"{name}.chunk_size",
         f"must divide {name}.num_steps={t.num_steps}")
  optim = name.replace("train", "optim")
  checks.positive(f"{optim}.learning_rate", o.learning_rate)
  checks.number(f"{optim}.grad_clip", o.grad_clip, low=0)  # 0: no clipping
  checks.integer(f"{optim}.warmup_steps", o.warmup_steps, low=0)


def validate(cfg: ml_collections.ConfigDict) -> None:
  """Raises ConfigError (naming the field and the allowed values) before anything compiles."""
  # here: the registry imports the experiments (matplotlib, orbax); the application table
  # imports this module for EVALUATION_FIELDS at every binary's start
  from compgen_jax.letters import registry
  names, allowed = cfg.experiments, ", ".join(registry.EXPERIMENTS)
  bad = [n for n in names if n not in registry.EXPERIMENTS]
  hint = " (give a tuple: --config.experiments=\"('substitution','length')\")" if any(
      "," in str(n) for n in bad) else ""
  _check(names and not bad, "experiments", f"unknown {bad}; allowed: {allowed}{hint}")
  checks.integer("num_seeds", cfg.num_seeds, low=1)
  checks.choice("init", cfg.init, INITS)
  m, d = cfg.model, cfg.data
  checks.choice("model.positions", m.positions, POSITIONS)
  checks.choice("model.init", m.init, MODEL_INITS)
  for field in ("width", "num_heads", "num_layers", "mlp_ratio"):
    checks.integer(f"model.{field}", m[field], low=1)
  _check(m.width % m.num_heads == 0, "model.num_heads", f"must divide model.width={m.width}")
  _check(m.positions != "rotary" or (m.width // m.num_heads) % 2 == 0, "model.width",
         "rotary positions need an even head dimension (width / num_heads)")
  checks.choice("data.layout", d.layout, data.LAYOUTS)
  _check(1 <= d.train_min_len <= d.train_len <= d.length_max, "data.train_len",
         f"need 1 <= train_min_len <= train_len <= length_max={d.length_max}")
  longest = data.seq_len(d.layout, d.length_max)
  _check(m.positions != "learned" or longest <= m.max_len, "data.length_max",
         f"learned positions allow sequences of model.max_len={m.max_len} tokens; "
         f"length_max={d.length_max} needs {longest} in layout {d.layout!r}")
  checks.integer("data.num_train", d.num_train, low=0)  # 0: fresh strings every step
  for field in ("test_size", "length_per_len"):
    checks.integer(f"data.{field}", d[field], low=1)
  _validate_training("train", cfg.train, cfg.optim)
  _validate_training("finetune.train", cfg.finetune.train, cfg.finetune.optim)
  c = cfg.compose
  _check(not isinstance(c.pairs, str), "compose.pairs",
         "must be a tuple of pairs, e.g. (('A>B','C>D'),)")
  ps = [_subs("compose.pairs", p) for p in c.pairs]
  _check(len(ps) >= 1, "compose.pairs", "needs at least one pair, e.g. (('A>B','C>D'),)")
  _check(not any(data.conflicting(p) for p in ps), "compose.pairs",
         "two experts of a pair rewrite the same letter ('apply both' is undefined; that case "
         "is compose.overlap)")
  checks.numbers("compose.lambdas", c.lambdas, allow_empty=True)  # (): every weight 1
  _check(not c.lambdas or all(len(p) == len(c.lambdas) for p in ps), "compose.lambdas",
         f"has {len(c.lambdas)} weights but the pairs have {[len(p) for p in ps]} experts")
  checks.numbers("compose.ta_lambdas", c.ta_lambdas, low=0, low_open=True, allow_empty=True)
  k_subs = _subs("compose.k_experts", c.k_experts)
  checks.integer("compose.k_max", c.k_max, 1, len(k_subs))  # the first k_max of k_experts
  srcs, dsts = [s[0] for s in k_subs[:c.k_max]], [s[2] for s in k_subs[:c.k_max]]
  _check(len(set(srcs)) == len(srcs) and not set(srcs) & set(dsts), "compose.k_experts",
         "must be disjoint: distinct source letters, no target that is another's source")
  _subs("compose.overlap", c.overlap, 2)
  _subs("compose.chain", c.chain, 2)
  _check(not isinstance(c.qualitative, str) and all(
      isinstance(q, str) and q and set(q) <= set(data.SYMBOLS) and len(q) <= d.length_max
      for q in c.qualitative), "compose.qualitative",
      "must be a tuple of strings over A-Z and space, each at most data.length_max letters")
  checks.positive("compose.kl_threshold", c.kl_threshold)
  checks.positive("compose.temperature", c.temperature)
  spec.validate(c)
  spec.validate_sampling(c, "compose")
  spec.check_weights(spec.from_config(c), c.lambdas, len(ps[0]), "compose.lambdas")
  _check(OPERATORS[c.operator].weighted or "k_experts" not in names, "compose.operator",
         f"the {c.operator!r} operator has no weights, so k_experts cannot pad its unused slots "
         "with weight 0: leave k_experts out of experiments or use operator 'paper'")
  _check(c.eos == "composed" or d.layout != "position", "compose.eos",
         "the 'position' layout has no EOS: only 'composed'")
  checks.integer("compose.eval_batch", c.eval_batch, low=1)
  checks.number("compose.ortho_norm_floor", c.ortho_norm_floor, 0, 1, high_open=True)
  for e in registry.enabled(cfg):
    if e.validate is not None:
      e.validate(cfg)
