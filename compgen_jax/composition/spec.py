"""What a composition does at each decoding step besides its operator's weights, and how the
token is picked: the static, hashable specs the jitted loops close over, their config fields
and their validation (ConfigError naming the field, before anything compiles).

Config fields (a `compose` section; the same names in configs/letters.py and configs/llm.py):
  operator   a name in `compose.OPERATORS`: paper: log p_b + sum_i lam_i (log p_i - log p_b)
             (signed weights also give DExperts, proxy-tuning, contrastive decoding and CFG:
             docs/composition_spec.md); authors: sum_i log p_i - max(log p_b, -1e4) (their
             notebook; all weights 1)
  mask       none | top_p: only the background's nucleus of mass mask_p | alpha: only tokens
             with p_b >= mask_alpha * max p_b (contrastive decoding's plausibility mask)
  gate       none | kl: expert i applies only where KL(p_i || p_b) > gate_tau | top1: only the
             expert of largest KL, where that KL > gate_tau (elsewhere it is the background)
  eos        composed (the operator's p(EOS)) | background (p_b(EOS)) | vote (EOS for sure when
             most models rank it first, never otherwise) | min (the smallest p_m(EOS))
Sampling fields (`generate` in llm.py, `compose` in letters.py): greedy, temperature, top_k
(0: off), top_p (1: off), min_p (0: off). A composition system of llm.py may override any
`compose` field for itself (`overridden`: `compositions.<name>.compose`).
"""

from typing import NamedTuple

import ml_collections

from compgen_jax import checks
from compgen_jax.composition.compose import OPERATORS
from compgen_jax.types import ConfigError

MASKS = ("none", "top_p", "alpha")
GATES = ("none", "kl", "top1")
EOS_RULES = ("composed", "background", "vote", "min")


class Spec(NamedTuple):
  """The step rules around the operator (static: one compile per spec). The defaults are the
  paper's operator alone, as before these rules existed."""
  operator: str = "paper"
  mask: str = "none"
  mask_p: float = 0.9
  mask_alpha: float = 0.1
  gate: str = "none"
  gate_tau: float = 0.1
  eos: str = "composed"


class Truncation(NamedTuple):
  """Sampling filters applied after the temperature, in this order (defaults: none)."""
  top_k: int = 0
  top_p: float = 1.0
  min_p: float = 0.0


PAPER = Spec()                 # the paper's operator alone: the default everywhere
NO_TRUNCATION = Truncation()


def describe(spec: Spec) -> str:
  """The operator and each rule that is on, in words: 'authors, mask=top_p 0.9, gate=kl 0.1'."""
  parts = [spec.operator]
  if spec.mask != "none":
    parts.append(f"mask={spec.mask} {spec.mask_p if spec.mask == 'top_p' else spec.mask_alpha:g}")
  if spec.gate != "none":
    parts.append(f"gate={spec.gate} {spec.gate_tau:g}")
  if spec.eos != "composed":
    parts.append(f"eos={spec.eos}")
  return ", ".join(parts)


def spec_fields(**overrides) -> dict:
  """A config section's spec fields with their defaults (Spec's), as the config files write
  them and as a config saved before these fields existed gets them."""
  return {**Spec._field_defaults, **overrides}


def truncation_fields() -> dict:
  return dict(Truncation._field_defaults)


def validate(c, prefix: str = "compose") -> None:
  """ConfigError naming `prefix.field` for a bad spec field of config section `c`."""
  checks.choice(f"{prefix}.operator", c.operator, OPERATORS)
  checks.choice(f"{prefix}.mask", c.mask, MASKS)
  checks.number(f"{prefix}.mask_p", c.mask_p, 0, 1, low_open=True)
  checks.number(f"{prefix}.mask_alpha", c.mask_alpha, 0, 1, low_open=True)
  checks.choice(f"{prefix}.gate", c.gate, GATES)
  checks.number(f"{prefix}.gate_tau", c.gate_tau, low=0)
  checks.choice(f"{prefix}.eos", c.eos, EOS_RULES)


def overridden(base, overrides, prefix: str) -> ml_collections.FrozenConfigDict:
  """Config section `base` (already validated) with the fields `overrides` names in their
  place; ConfigError naming `prefix.field` for a field `base` lacks or a bad spec value (a
  value `base` holds passed `validate` already, so a bad one is an override)."""
  if not isinstance(overrides, ml_collections.ConfigDict | dict):
    raise ConfigError(prefix, f"must be a section of {', '.join(base)} fields, got {overrides!r}")
  for field in overrides:
    if field not in base:
      raise ConfigError(f"{prefix}.{field}", f"not a field of the step spec; allowed: "
                        f"{', '.join(base)}")
  merged = ml_collections.FrozenConfigDict({**dict(base.items()), **dict(overrides.items())})
  validate(merged, prefix)
  return merged


def validate_sampling(c, prefix: str) -> None:
  """ConfigError naming `prefix.field` for bad sampling fields (greedy reads none of them)."""
  checks.boolean(f"{prefix}.greedy", c.greedy)
  if c.greedy:
    return
  checks.positive(f"{prefix}.temperature", c.temperature)
  checks.integer(f"{prefix}.top_k", c.top_k, low=0)
  checks.number(f"{prefix}.top_p", c.top_p, 0, 1, low_open=True)
  checks.number(f"{prefix}.min_p", c.min_p, 0, 1, high_open=True)


def _read(cls, c):
  """A spec from a config section; a field it lacks (a section written before the field
  existed) takes the default."""
  return cls(**{f: type(d)(c.get(f, d)) for f, d in cls._field_defaults.items()})


def from_config(c) -> Spec:
  return _read(Spec, c)


def truncation(c) -> Truncation:
  return _read(Truncation, c)


def check_weights(spec: Spec, lam, num_experts: int, field: str) -> None:
  """An operator without weights (the authors') takes none; otherwise () or one weight per
  expert."""
  checks.numbers(field, lam, allow_empty=True)
  if not OPERATORS[spec.operator].weighted and len(lam):
    raise ConfigError(field, f"the {spec.operator!r} operator has all weights 1: leave it ()")
  if len(lam) and len(lam) != num_experts:
    raise ConfigError(field, f"{len(lam)} weights for {num_experts} experts")
