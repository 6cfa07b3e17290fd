"""The study's recipe axis (issue 55): the same experts fine-tuned by several recipes (lm_train's
finetune section and whatever else a recipe changes), each recipe's experts, drift and scores in
WORKDIR/<recipe>/, from the one data directory and background (and joint model) at the top.

cfg.recipes holds named recipes, each a partial lm_train tree applied over every expert's
section ({"finetune": {"lora_rank": 8}, "optim": {"learning_rate": 3e-3}}); study.recipes
names those the study runs, in order. With none named the experts are trained as their sections
say, into WORKDIR itself (the layout of a study without recipes).
"""

import os

import ml_collections

from compgen_jax.types import ConfigError


def names(cfg: ml_collections.ConfigDict) -> tuple[str, ...]:
  """The recipes the study runs; ("",) when it names none (the experts as configured)."""
  return tuple(cfg.study.recipes) or ("",)


def root(workdir: str, recipe: str) -> str:
  """Where a recipe's experts, drift and scores go (the study's workdir without recipes)."""
  return os.path.join(workdir, recipe) if recipe else workdir


def stage_name(recipe: str, name: str) -> str:
  return f"{recipe}/{name}" if recipe else name


def _override(section: ml_collections.ConfigDict, overrides, path: str) -> None:
  for key, value in overrides.items():
    field = f"{path}.{key}"
    if key not in section:
      raise ConfigError(field, f"names no field of an expert's section ({', '.join(section)})")
    if isinstance(section[key], ml_collections.ConfigDict):
      if not isinstance(value, dict | ml_collections.ConfigDict):
        raise ConfigError(field, f"must be a section of fields, got {value!r}")
      _override(section[key], value, field)
    else:
      try:
        section[key] = value
      except TypeError as e:  # ml_collections keeps a field's type
        raise ConfigError(field, str(e)) from e


def expert_section(cfg: ml_collections.ConfigDict, skill: str,
                   recipe: str) -> ml_collections.ConfigDict:
  """The expert's section with the recipe applied over it (ConfigError naming the field)."""
  out = ml_collections.ConfigDict(cfg.experts[skill].to_dict())
  if recipe:
    if recipe not in cfg.recipes:
      raise ConfigError("study.recipes", f"{recipe!r} is not a recipe of the config's "
                        f"`recipes` ({', '.join(cfg.recipes) or 'none'})")
    _override(out, cfg.recipes[recipe], f"recipes.{recipe}")
  return out
