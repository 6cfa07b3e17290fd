"""Task-support strategies: which tasks are trained on, which scored OOD (the splits built from
them are in splits.py).

A strategy is `fn(rng, M, K, frac_ood, max_retries) -> bool [T]`, True = held out (not trained).
The OOD set is the held-out set, except for connected / disconnected, which are both scored on
the tasks neither trains on (as the reference), so the other one's training tasks are neither
train nor OOD there. Train and OOD are always disjoint. n_ood = int(T * frac_ood) (round down, see
combinatorics.split_sizes) and n_train = T - n_ood where a strategy follows frac_ood. Each strategy
runs its own budget check (combinatorics.require_* etc.).
"""

import functools
from collections.abc import Callable

import numpy as np

from compgen_jax import checks
from compgen_jax.tasks import combinatorics as cb
from compgen_jax.types import ConfigError

Rng = np.random.Generator
Strategy = Callable[[Rng, int, int, float, int], np.ndarray]


def _valid(ood_T: np.ndarray, M: int, K: int) -> bool:
  return cb.is_compositional(~ood_T, M, K) and cb.is_connected(~ood_T, M, K)


def _random_ood(rng: Rng, T: int, n_ood: int) -> np.ndarray:
  # A uniformly random subset, i.e. the tail of a random permutation; drawing only the smaller
  # side keeps each retry O(min(n_train, n_ood)) rather than O(T).
  ood = np.zeros(T, bool) if n_ood <= T - n_ood else np.ones(T, bool)
  ood[rng.choice(T, min(n_ood, T - n_ood), replace=False)] = n_ood <= T - n_ood
  return ood


def _retry(rng: Rng, M: int, K: int, frac_ood: float, max_retries: int,
           draw: Callable[[Rng, int, int, np.ndarray], np.ndarray | None]) -> np.ndarray:
  cb.require_random(M, K, frac_ood)
  T, n_ood, n_train = cb.split_sizes(M, K, frac_ood)
  for _ in range(max_retries):
    ood = draw(rng, M, K, _random_ood(rng, T, n_ood))
    if ood is not None and _valid(ood, M, K):
      return ood
  raise ConfigError("task.frac_ood", f"no valid split found in {max_retries} tries: {n_train} "
                    f"random training tasks were never both compositional and connected over {M} "
                    f"modules (at least {cb.min_train_tasks(M, K)} are needed); lower frac_ood")


def random(rng: Rng, M: int, K: int, frac_ood: float, max_retries: int) -> np.ndarray:
  """The last int(T * frac_ood) tasks of a random permutation, redrawn until the rest is valid."""
  return _retry(rng, M, K, frac_ood, max_retries, lambda rng, M, K, ood: ood)


def _find_swap(usage: np.ndarray, tb: np.ndarray, ood: np.ndarray, M: int, K: int):
  """The most unbalanced pair (a, b), gap >= 2, with swappable tasks: (a, b, positions, targets)."""
  order = np.argsort(usage, kind="stable").tolist()
  for a in reversed(order):
    for b in order:
      if usage[a] - usage[b] < 2:
        break
      pos = np.flatnonzero(((tb & (1 << a)) != 0) & ((tb & (1 << b)) == 0))
      target = cb.index_of(tb[pos] ^ ((1 << a) | (1 << b)), M, K)
      keep = ood[target]
      if keep.any():
        return a, b, pos[keep], target[keep]
  return None


def _balance(rng: Rng, M: int, K: int, ood: np.ndarray) -> np.ndarray | None:
  """Swap training task s (has a, lacks b) for held-out s - {a} + {b} until max-min usage <= 1.

  Each swap keeps hotness and the train size, and moving k <= (u_a - u_b) // 2 uses from a to b
  strictly lowers sum(u^2), so the loop terminates. None if stuck before balance.
  """
  bits = cb.task_bits(M, K)
  train = np.flatnonzero(~ood)
  tb = bits[train]
  usage = cb.module_usage(~ood, M, K)
  while usage.max() - usage.min() > 1:
    found = _find_swap(usage, tb, ood, M, K)
    if found is None:
      return None
    a, b, pos, target = found
    pick = rng.choice(pos.size, min(pos.size, (usage[a] - usage[b]) // 2), replace=False)
    pos, target = pos[pick], target[pick]
    ood[train[pos]] = True
    ood[target] = False
    train[pos], tb[pos] = target, bits[target]
    usage[a] -= pick.size
    usage[b] += pick.size
  return ood


def equal(rng: Rng, M: int, K: int, frac_ood: float, max_retries: int) -> np.ndarray:
  """Like random, then hotness-preserving swaps until module usage differs by at most one."""
  return _retry(rng, M, K, frac_ood, max_retries, _balance)


def connected(rng: Rng, M: int, K: int, frac_ood: float, max_retries: int) -> np.ndarray:
  """Training = singletons + pairs (i, i+1), (i, i+2) mod M (K=2, even M>4); frac_ood ignored.

  Scored on ring_ood, the tasks that neither connected nor disconnected trains on."""
  cb.require_ring(M, K, frac_ood)
  i = np.arange(M, dtype=np.int64)
  single = np.int64(1) << i
  train_bits = np.concatenate([single, single | (1 << (i + 1) % M), single | (1 << (i + 2) % M)])
  ood = np.ones(cb.num_tasks(M, K), bool)
  ood[cb.index_of(train_bits, M, K)] = False
  return ood


def disconnected(rng: Rng, M: int, K: int, frac_ood: float, max_retries: int) -> np.ndarray:
  """Training = subsets inside the first or the second half (K=2, even M>4); frac_ood ignored.

  Scored on ring_ood, the tasks that neither connected nor disconnected trains on."""
  cb.require_ring(M, K, frac_ood)
  return cb.touching(M, K, range(M // 2)) & cb.touching(M, K, range(M // 2, M))


def ring_ood(M: int, K: int) -> np.ndarray:
  """bool [T]: the common OOD set of connected and disconnected (in neither training set), so
  their OOD scores compare the supports on the same tasks."""
  return connected(None, M, K, 0.0, 1) & disconnected(None, M, K, 0.0, 1)


def pseudo_random_disconnected(rng: Rng, M: int, K: int, frac_ood: float,
                               max_retries: int) -> np.ndarray:
  """Hold out the subsets crossing [0, s) | [s, M), then random within-part ones up to n_ood."""
  s = cb.cut_size(M, K, frac_ood)
  _, n_ood, _ = cb.split_sizes(M, K, frac_ood)
  ood = cb.touching(M, K, range(s)) & cb.touching(M, K, range(s, M))
  ood[rng.choice(np.flatnonzero(~ood), n_ood - int(ood.sum()), replace=False)] = True
  return ood


def non_compositional(rng: Rng, M: int, K: int, frac_ood: float, max_retries: int) -> np.ndarray:
  """Hold out every subset containing the last module, which is never trained; frac_ood ignored."""
  return cb.touching(M, K, [M - 1])


def popular_modules(rng: Rng, M: int, K: int, frac_ood: float, max_retries: int) -> np.ndarray:
  """Training = subsets touching the first n modules (n the largest within the budget), topped
  up to n_train with random subsets containing module n, as the reference does.

  The reference redraws the top-up until the support is compositional and connected; with K >= 2
  the first n modules' subsets already are (every module shares {0, m}), so one draw suffices.
  """
  n = cb.popular_count(M, K, frac_ood)
  _, _, n_train = cb.split_sizes(M, K, frac_ood)
  ood = ~cb.touching(M, K, range(n))
  extra = n_train - int((~ood).sum())
  if extra:  # fewer than the held-out subsets containing module n, by the choice of n
    ood[rng.choice(np.flatnonzero(ood & cb.touching(M, K, [n])), extra, replace=False)] = False
  return ood


def unpopular_modules(rng: Rng, M: int, K: int, frac_ood: float, max_retries: int) -> np.ndarray:
  """Training = all subsets of a core [0, c), one {0, r} per rare module r >= c, then (as the
  reference) the first subsets in table order of module c with core modules and no other rare
  module, up to n_train: rare modules r > c are each seen in exactly one training task."""
  c = cb.core_size(M, K, frac_ood)
  _, _, n_train = cb.split_sizes(M, K, frac_ood)
  ood = ~cb.within(M, K, range(c))
  rare = np.arange(c, M, dtype=np.int64)
  ood[cb.index_of((np.int64(1) << rare) | 1, M, K)] = False
  extra = n_train - int((~ood).sum())
  if extra:  # fewer than those subsets of module c, by the choice of c (and c < M)
    top_up = ood & cb.within(M, K, range(c + 1)) & ~cb.within(M, K, [c])
    ood[np.flatnonzero(top_up)[:extra]] = False
  return ood


STRATEGIES: dict[str, Strategy] = {
    "random": random, "equal": equal, "connected": connected, "disconnected": disconnected,
    "pseudo_random_disconnected": pseudo_random_disconnected,
    "non_compositional": non_compositional, "popular_modules": popular_modules,
    "unpopular_modules": unpopular_modules,
}

# Strategies whose held-out set is fixed by their structure, not by frac_ood.
IGNORE_FRAC = ("connected", "disconnected", "non_compositional")

# Cheap budget checks of each strategy, run by validate() before anything compiles.
_REQUIREMENTS = {
    "random": cb.require_random, "equal": cb.require_random, "connected": cb.require_ring,
    "disconnected": cb.require_ring, "pseudo_random_disconnected": cb.cut_size,
    "popular_modules": cb.popular_count, "unpopular_modules": cb.core_size,
}


# Strategies whose OOD set is not their whole held-out set: OOD = held out and in this mask.
_OOD_SETS = {"connected": ring_ood, "disconnected": ring_ood}


def validate(strategy: str, M: int, K: int, frac_ood: float | None) -> None:
  """Cheap checks before anything compiles; frac_ood=None skips the budget checks (traced value).

  frac_ood is checked as splits use it: combinatorics.canonical_frac (float32 precision).
  """
  checks.integer("task.num_modules", M, 1, cb.MAX_MODULES)
  checks.integer("task.max_hotness", K, 1, M)
  checks.choice("task.support", strategy, STRATEGIES)
  if frac_ood is None:
    if strategy in ("connected", "disconnected"):
      cb.require_ring(M, K, 0.0)
    return
  if not 0.0 <= cb.canonical_frac(frac_ood) < 1.0:
    raise ConfigError("task.frac_ood", f"must be in [0, 1) at float32 precision, got {frac_ood!r}")
  T, n_ood, _ = cb.split_sizes(M, K, frac_ood)
  if frac_ood > 0 and n_ood == 0 and strategy not in IGNORE_FRAC:
    raise ConfigError("task.frac_ood", f"{frac_ood!r} of the {T} tasks rounds down to 0 held-out "
                      f"tasks (OOD metrics would be NaN); use 0, or at least 1/{T} = {1 / T:.3g}")
  if strategy in _REQUIREMENTS:
    _REQUIREMENTS[strategy](M, K, cb.canonical_frac(frac_ood))


@functools.lru_cache(maxsize=64)
def _split_masks(strategy: str, seed: bytes, M: int, K: int, frac_ood: float, max_retries: int):
  rng = np.random.default_rng(np.frombuffer(seed, np.uint32))
  held_out = np.asarray(STRATEGIES[strategy](rng, M, K, frac_ood, max_retries), bool)
  train = ~held_out
  ood = held_out & _OOD_SETS[strategy](M, K) if strategy in _OOD_SETS else held_out
  train.flags.writeable = ood.flags.writeable = False
  return train, ood


def split_masks(strategy: str, seed_data: np.ndarray, M: int, K: int, frac_ood: float,
                max_retries: int = 1000) -> tuple[np.ndarray, np.ndarray]:
  """(train, ood) bool [T] masks (read-only, cached) drawn from seed_data = key_data(key).

  Disjoint; exhaustive except for connected / disconnected (see the module docstring). frac_ood
  may be the config float or the device float32: both map to the same canonical_frac (and cache).
  """
  validate(strategy, M, K, frac_ood)
  checks.integer("task.max_retries", max_retries, low=1)
  seed = np.asarray(seed_data).astype(np.uint32).tobytes()
  return _split_masks(strategy, seed, int(M), int(K), cb.canonical_frac(frac_ood),
                      int(max_retries))
