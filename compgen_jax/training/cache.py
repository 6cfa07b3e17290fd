"""Memoised builders of jitted programs, keyed by a config's contents."""

import functools

import ml_collections


def cache_by_config(make):
  """Memoises a builder of jitted functions `make(cfg, *args)` by the config's contents.

  Jitted closures are new objects on every build; reusing them lets a process that trains,
  resumes or evaluates the same config several times compile once.
  """
  memo = {}

  @functools.wraps(make)
  def cached(cfg: ml_collections.ConfigDict, *args):
    key = (make.__module__, make.__qualname__, cfg.to_json_best_effort(sort_keys=True), args)
    if key not in memo:
      memo[key] = make(cfg, *args)
    return memo[key]

  cached.cache_clear = memo.clear
  return cached
