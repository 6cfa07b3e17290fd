"""Shared test helpers: load a preset from configs/ the way the binaries do."""

import importlib.util
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_config(name: str, preset: str, **overrides):
  """configs/<name>.py:<preset> with dotted overrides, e.g. {'train.num_steps': 100}."""
  spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, "configs", f"{name}.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  cfg = module.get_config(preset)
  for path, value in overrides.items():
    *parents, leaf = path.split(".")
    node = cfg
    for p in parents:
      node = node[p]
    node[leaf] = value
  return cfg
