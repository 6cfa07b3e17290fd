"""A workdir holds one config: written on first use, compared on every later use."""

import json
import os

import ml_collections

from compgen_jax.types import ConfigError

CONFIG_FILE = "config.json"


def config_dict(cfg: ml_collections.ConfigDict) -> dict:
  """The config as plain JSON data (tuples become lists)."""
  return json.loads(cfg.to_json_best_effort(sort_keys=True))


def check(workdir: str, cfg: ml_collections.ConfigDict) -> bool:
  """True when `workdir` already holds this config, False when it holds none; a different or
  damaged config (or a workdir that is a file) is a ConfigError naming what differs. Writes
  nothing."""
  path = os.path.join(workdir, CONFIG_FILE)
  new = config_dict(cfg)
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise ConfigError("workdir", f"{workdir!r} exists and is not a directory")
  if os.path.exists(path):
    old = _read_json(path)
    if not isinstance(old, dict):
      raise ConfigError("workdir", f"{path!r} holds a JSON {type(old).__name__}, not a "
                        "compgen_jax config; use a new --workdir")
    if old != new:
      diff = sorted(_diff_keys(old, new))
      raise ConfigError(
          "workdir", f"{workdir!r} holds a run with a different config (differs in: "
          f"{', '.join(diff[:10])}); use a new --workdir")
    return True
  return False


def prepare(workdir: str, cfg: ml_collections.ConfigDict) -> bool:
  """Creates `workdir` with config.json, or checks it holds the same config.

  Returns True when the workdir already existed with this config (a resume). A different
  config is refused with the fields that differ; nothing is overwritten.
  """
  if check(workdir, cfg):
    return True
  path = os.path.join(workdir, CONFIG_FILE)
  try:
    os.makedirs(workdir, exist_ok=True)
    with open(path + ".tmp", "w") as f:
      json.dump(config_dict(cfg), f, indent=2, sort_keys=True)
    os.replace(path + ".tmp", path)
  except OSError as e:
    raise ConfigError("workdir", f"cannot write {path!r}: {e.strerror or e}") from e
  return False


def _read_json(path: str):
  try:
    with open(path) as f:
      return json.load(f)
  except json.JSONDecodeError as e:
    raise ConfigError("workdir", f"{path!r} is not valid JSON ({e}); the workdir is damaged: "
                      "use a new --workdir") from e


def load_config(workdir: str) -> ml_collections.ConfigDict:
  """The config a workdir was trained with; a clear error when there is none."""
  path = os.path.join(workdir, CONFIG_FILE)
  if not os.path.exists(path):
    raise ConfigError("workdir", f"{workdir!r} has no {CONFIG_FILE}: not a compgen_jax workdir")
  data = _read_json(path)
  if not isinstance(data, dict):
    raise ConfigError("workdir", f"{path!r} holds a JSON {type(data).__name__}, not a config")
  return ml_collections.ConfigDict(data)


def _diff_keys(a, b, prefix=""):
  if isinstance(a, dict) and isinstance(b, dict):
    for k in set(a) | set(b):
      yield from _diff_keys(a.get(k), b.get(k), f"{prefix}{k}.")
  elif a != b:
    yield prefix.rstrip(".")
