"""Which attribute combinations train: a fixed-shape split per run (tasks.splits.Split, the one
split type), built on the host from a key.

`random`: round(coverage * T) of the T = (S*C)^K combinations train, redrawn until every
(slot, attribute, value) appears in training (a compositional support: every concept is seen,
only its combinations are new). `non_compositional`: one (slot, attribute, value) drawn from the
key never trains; the rest of the training set is drawn as in `random`. Held out: all the others.
"""

import numpy as np

from compgen_jax import checks
from compgen_jax.images.scenes import Geometry
from compgen_jax.tasks.splits import Split, padded
from compgen_jax.types import ConfigError

STRATEGIES = ("random", "non_compositional")


def attributes(geo: Geometry, idx: np.ndarray | None = None) -> np.ndarray:
  """The (shape, colour) per slot [N, K, 2] of the combinations `idx` (default all T, in the
  index order of scenes.decode). A split asks only for the ones it draws: the paper's scenes
  have T = 36^4 = 1.7M combinations."""
  base = geo.num_shapes * geo.num_colours
  idx = np.arange(geo.num_combos, dtype=np.int64) if idx is None else np.asarray(idx, np.int64)
  digits = np.stack([(idx // base ** k) % base for k in range(geo.num_slots)], axis=-1)
  return np.stack([digits // geo.num_colours, digits % geo.num_colours], axis=-1)


def num_train(coverage: float, geo: Geometry) -> int:
  return int(round(float(np.float32(coverage)) * geo.num_combos))


def validate(strategy: str, coverages, geo: Geometry) -> None:
  """ConfigError naming the field for an unknown strategy or a coverage that cannot hold every
  concept in training with some combination held out."""
  checks.choice("split.strategy", strategy, STRATEGIES)
  checks.numbers("split.coverage", coverages, 0, 1, low_open=True, high_open=True)
  need = max(geo.num_shapes, geo.num_colours) + (strategy == "non_compositional")
  for c in coverages:
    n = num_train(c, geo)
    if n < need or n >= geo.num_combos:
      raise ConfigError("split.coverage", f"{c} trains {n} of {geo.num_combos} combinations; "
                        f"each value must have {need} <= n_train < {geo.num_combos} "
                        f"(every concept trained, something held out)")


def covered(train_attrs_NxKx2: np.ndarray, geo: Geometry) -> np.ndarray:
  """[K, 2, max(S, C)] bool: which (slot, attribute, value) occur in the given combinations."""
  out = np.zeros((geo.num_slots, 2, max(geo.num_shapes, geo.num_colours)), bool)
  for k in range(geo.num_slots):
    for a in range(2):
      out[k, a, np.unique(train_attrs_NxKx2[:, k, a])] = True
  return out


def required(geo: Geometry, excluded: tuple | None = None) -> np.ndarray:
  """The concepts a split must train [K, 2, V]: all real values except `excluded`."""
  out = np.zeros((geo.num_slots, 2, max(geo.num_shapes, geo.num_colours)), bool)
  out[:, 0, :geo.num_shapes] = True
  out[:, 1, :geo.num_colours] = True
  if excluded is not None:
    out[excluded] = False
  return out


def host_split(seed_data: np.ndarray, coverage: float, strategy: str, geo: Geometry,
               max_retries: int) -> Split:
  """The split of one run, from its split-stream key data; ConfigError after max_retries draws
  that miss a concept."""
  rng = np.random.default_rng([int(v) for v in np.asarray(seed_data).ravel()])
  n = num_train(coverage, geo)
  allowed = np.ones(geo.num_combos, bool)
  excluded = None
  if strategy == "non_compositional":
    k, a = int(rng.integers(geo.num_slots)), int(rng.integers(2))
    excluded = (k, a, int(rng.integers((geo.num_shapes, geo.num_colours)[a])))
    allowed = attributes(geo)[:, k, a] != excluded[2]
    n = min(n, int(allowed.sum()))
  need = required(geo, excluded)
  candidates = np.flatnonzero(allowed)
  for _ in range(max_retries):
    train = np.sort(rng.choice(candidates, n, replace=False))
    if np.array_equal(covered(attributes(geo, train), geo) & need, need):
      break
  else:
    raise ConfigError("split.coverage", f"coverage {coverage} ({n} combinations): no draw in "
                      f"{max_retries} trained every (slot, attribute, value); raise the coverage "
                      f"or split.max_retries")
  is_train = np.zeros(geo.num_combos, bool)
  is_train[train] = True
  ood = np.flatnonzero(~is_train)
  # the key's order of each set (train first, then held out: the draws' order is the split's)
  train_idx = padded(rng.permutation(train), geo.num_combos)
  ood_idx = padded(rng.permutation(ood), geo.num_combos)
  return Split(train_idx, np.int32(len(train)), ood_idx, np.int32(len(ood)))
