"""Validation of a letters config (configs/letters.py) before anything compiles."""

import ml_collections

from compgen_jax.letters import data, registry
from compgen_jax.lm.transformer import POSITIONS
from compgen_jax.types import ConfigError

INITS = ("independent", "shared")


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


def _numbers(field: str, values, positive: bool) -> None:
  ok = not isinstance(values, str) and all(
      isinstance(v, int | float) and not isinstance(v, bool) and (v > 0 or not positive)
      for v in values)
  _check(ok, field, f"must be a tuple of {'positive ' if positive else ''}numbers, got {values!r}")


def _validate_training(name: str, t, o) -> None:
  _check(t.num_steps >= 1 and t.batch_size >= 1, f"{name}.num_steps",
         "num_steps, batch_size >= 1")
  _check(t.chunk_size >= 1 and t.num_steps % min(t.chunk_size, t.num_steps) == 0,
         f"{name}.chunk_size", f"must divide {name}.num_steps={t.num_steps}")
  optim = name.replace("train", "optim")
  _check(o.learning_rate > 0, f"{optim}.learning_rate", "must be > 0")
  _check(o.grad_clip >= 0 and o.warmup_steps >= 0, f"{optim}.grad_clip",
         "grad_clip (0: none) and warmup_steps must be >= 0")


def validate(cfg: ml_collections.ConfigDict) -> None:
  """Raises ConfigError (naming the field and the allowed values) before anything compiles."""
  names, allowed = cfg.experiments, ", ".join(registry.EXPERIMENTS)
  bad = [n for n in names if n not in registry.EXPERIMENTS]
  hint = " (give a tuple: --config.experiments=\"('substitution','length')\")" if any(
      "," in str(n) for n in bad) else ""
  _check(names and not bad, "experiments", f"unknown {bad}; allowed: {allowed}{hint}")
  _check(cfg.num_seeds >= 1, "num_seeds", "must be >= 1")
  _check(cfg.init in INITS, "init", f"{cfg.init!r} not in {INITS}")
  m, d = cfg.model, cfg.data
  _check(m.positions in POSITIONS, "model.positions", f"{m.positions!r} not in {POSITIONS}")
  _check(m.width >= 1, "model.width", f"must be >= 1, got {m.width}")
  _check(m.num_heads >= 1 and m.width % m.num_heads == 0, "model.num_heads",
         f"must divide model.width={m.width}")
  _check(m.positions != "rotary" or (m.width // m.num_heads) % 2 == 0, "model.width",
         "rotary positions need an even head dimension (width / num_heads)")
  _check(m.num_layers >= 1 and m.mlp_ratio >= 1, "model.num_layers", "layers, mlp_ratio >= 1")
  _check(d.layout in data.LAYOUTS, "data.layout", f"{d.layout!r} not in {data.LAYOUTS}")
  _check(1 <= d.train_min_len <= d.train_len <= d.length_max, "data.train_len",
         f"need 1 <= train_min_len <= train_len <= length_max={d.length_max}")
  longest = data.seq_len(d.layout, d.length_max) if d.layout in data.LAYOUTS else 0
  _check(m.positions != "learned" or longest <= m.max_len, "data.length_max",
         f"learned positions allow sequences of model.max_len={m.max_len} tokens; "
         f"length_max={d.length_max} needs {longest} in layout {d.layout!r}")
  _check(d.num_train >= 0 and d.test_size >= 1 and d.length_per_len >= 1, "data.test_size",
         "num_train >= 0, test_size >= 1, length_per_len >= 1")
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
  _numbers("compose.lambdas", c.lambdas, positive=False)
  _check(not c.lambdas or all(len(p) == len(c.lambdas) for p in ps), "compose.lambdas",
         f"has {len(c.lambdas)} weights but the pairs have {[len(p) for p in ps]} experts")
  _numbers("compose.ta_lambdas", c.ta_lambdas, positive=True)
  k_subs = _subs("compose.k_experts", c.k_experts)
  _check(1 <= c.k_max <= len(k_subs), "compose.k_max", f"must be in 1..{len(k_subs)}")
  srcs, dsts = [s[0] for s in k_subs[:c.k_max]], [s[2] for s in k_subs[:c.k_max]]
  _check(len(set(srcs)) == len(srcs) and not set(srcs) & set(dsts), "compose.k_experts",
         "must be disjoint: distinct source letters, no target that is another's source")
  _subs("compose.overlap", c.overlap, 2)
  _subs("compose.chain", c.chain, 2)
  _check(not isinstance(c.qualitative, str) and all(
      isinstance(q, str) and q and set(q) <= set(data.SYMBOLS) and len(q) <= d.length_max
      for q in c.qualitative), "compose.qualitative",
      "must be a tuple of strings over A-Z and space, each at most data.length_max letters")
  _check(c.kl_threshold > 0 and c.temperature > 0 and c.eval_batch >= 1, "compose.kl_threshold",
         "kl_threshold, temperature > 0 and eval_batch >= 1")
  _check(0 <= c.ortho_norm_floor < 1, "compose.ortho_norm_floor", "must be in [0, 1)")
  for e in registry.enabled(cfg):
    if e.validate is not None:
      e.validate(cfg)
