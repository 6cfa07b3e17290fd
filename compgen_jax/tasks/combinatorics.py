"""The task table (all subsets of 1..K of M modules), subset masks, and checks on supports.

Row order: hotness 1..K, then `itertools.combinations` (lexicographic) order within a hotness.
Tables are built once per (M, K) and returned read-only, since they are shared through caches.
The budget checks raise ConfigError naming the config field, before anything compiles.
"""

import functools
import math
from fractions import Fraction

import numpy as np

from compgen_jax.types import ConfigError

# Subsets are also bitmasks (bit m = module m): int64 here on the host, which bounds host-only
# work (task tables, theory) to 62 modules, and uint32 on the device (jax without x64), which
# bounds training runs to 32. Both limits are defined here only.
MAX_MODULES = 62
MAX_DEVICE_MODULES = 32


def num_tasks(M: int, K: int) -> int:
  """T(M, K) = sum_{k=1..K} C(M, k), the number of subsets of 1..K of M modules."""
  return sum(math.comb(M, k) for k in range(1, K + 1))


def num_touching(M: int, K: int, n: int) -> int:
  """Number of tasks that contain at least one of the first n modules."""
  return num_tasks(M, K) - num_tasks(M - n, K)


def num_cross(M: int, K: int, s: int) -> int:
  """Number of tasks that touch both [0, s) and [s, M)."""
  return num_tasks(M, K) - num_tasks(s, K) - num_tasks(M - s, K)


def _readonly(x: np.ndarray) -> np.ndarray:
  x.flags.writeable = False
  return x


def _extend(combos: np.ndarray, M: int) -> np.ndarray:
  """The (k+1)-subsets from the k-subsets, both in itertools.combinations (lexicographic) order:
  each row in turn, followed by every larger module."""
  last = combos[:, -1].astype(np.int64)
  counts = M - 1 - last
  rows = np.repeat(np.arange(combos.shape[0]), counts)
  starts = np.cumsum(counts) - counts
  nxt = np.arange(rows.size) - starts[rows] + last[rows] + 1
  return np.concatenate([combos[rows], nxt[:, None].astype(combos.dtype)], axis=1)


@functools.lru_cache(maxsize=8)
def task_members(M: int, K: int) -> np.ndarray:
  """uint8 [T, K]: the modules of each task, padded with the task's own first module.

  Padding with a member (not -1) keeps every row a valid index list: repeats are no-ops for
  set membership and self-loops for connectivity. Built without Python loops over tasks
  (T = 4.5M at M=32, K=7).
  """
  members = np.empty((num_tasks(M, K), K), np.uint8)
  combos, start = np.arange(M, dtype=np.uint8)[:, None], 0
  for k in range(1, K + 1):
    if k > 1:
      combos = _extend(combos, M)
    members[start:start + combos.shape[0], :k] = combos
    members[start:start + combos.shape[0], k:] = combos[:, :1]
    start += combos.shape[0]
  return _readonly(members)


@functools.lru_cache(maxsize=8)
def task_table(M: int, K: int) -> np.ndarray:
  """bool [T, M]: row t marks the modules of task t."""
  members = task_members(M, K)
  table = np.zeros((members.shape[0], M), bool)
  table[np.arange(members.shape[0])[:, None], members] = True
  return _readonly(table)


@functools.lru_cache(maxsize=8)
def task_bits(M: int, K: int) -> np.ndarray:
  """int64 [T]: the bitmask of each task (bit m set iff module m is active)."""
  members = task_members(M, K)
  bits = np.zeros(members.shape[0], np.int64)
  for column in members.T:  # K passes over [T] rather than a [T, K] int64 temporary
    bits |= np.int64(1) << column.astype(np.int64)
  return _readonly(bits)


@functools.lru_cache(maxsize=8)
def _sorted_bits(M: int, K: int) -> tuple[np.ndarray, np.ndarray]:
  bits = task_bits(M, K)
  order = np.argsort(bits, kind="stable")
  return _readonly(bits[order]), _readonly(order)


def index_of(bits: np.ndarray, M: int, K: int) -> np.ndarray:
  """int64 task indices of the given subset bitmasks; -1 where a bitmask is not a task."""
  bits = np.asarray(bits, np.int64)
  sorted_bits, order = _sorted_bits(M, K)
  # Sorted queries walk the table once; random ones miss the cache (3x slower at T=5e5).
  by_value = np.argsort(bits, axis=None)
  pos = np.empty(bits.size, np.int64)
  pos[by_value] = np.searchsorted(sorted_bits, bits.reshape(-1)[by_value])
  pos = np.minimum(pos, sorted_bits.size - 1).reshape(bits.shape)
  return np.where(sorted_bits[pos] == bits, order[pos], -1)


def module_bits(modules) -> np.int64:
  """The bitmask of a collection of module ids."""
  return np.bitwise_or.reduce(np.int64(1) << np.asarray(modules, np.int64).reshape(-1))


def touching(M: int, K: int, modules) -> np.ndarray:
  """bool [T]: tasks containing at least one of `modules`."""
  return (task_bits(M, K) & module_bits(modules)) != 0


def within(M: int, K: int, modules) -> np.ndarray:
  """bool [T]: tasks all of whose modules are in `modules`."""
  return (task_bits(M, K) & ~module_bits(modules)) == 0


def module_usage(train_mask_T: np.ndarray, M: int, K: int) -> np.ndarray:
  """int64 [M]: in how many training tasks each module appears."""
  members = task_members(M, K)[np.asarray(train_mask_T, bool)]
  # Count each (task, module) once: padded repeats equal the row's first entry.
  first = np.bincount(members[:, 0], minlength=M)
  rest = members[:, 1:][members[:, 1:] != members[:, :1]]
  return first + np.bincount(rest, minlength=M)


def is_compositional(train_mask_T: np.ndarray, M: int, K: int) -> bool:
  """Every module appears in some training task."""
  covered = np.bitwise_or.reduce(task_bits(M, K)[np.asarray(train_mask_T, bool)])
  return bool(covered == (np.int64(1) << M) - 1)


def is_connected(train_mask_T: np.ndarray, M: int, K: int) -> bool:
  """The module graph with adjacency B^T B > 0 (B: training task x module) is connected over all M.

  A task connects its modules, so star edges from its first module suffice; the distinct edges
  (at most M^2) are found with a bincount per column (small temporaries), then merged by
  union-find.
  """
  members = task_members(M, K)[np.asarray(train_mask_T, bool)]
  first = members[:, 0].astype(np.int32) * M
  seen = np.zeros(M * M, bool)
  for column in members[:, 1:].T:
    seen |= np.bincount(first + column, minlength=M * M) > 0
  edges = np.flatnonzero(seen)
  parent = list(range(M))

  def find(i: int) -> int:
    while parent[i] != i:
      parent[i] = parent[parent[i]]
      i = parent[i]
    return i

  components = M
  for code in edges.tolist():
    a, b = find(code // M), find(code % M)
    if a != b:
      parent[a] = b
      components -= 1
  return components == 1


# Budgets of the task-support strategies: n_ood = int(T * frac_ood) (round down).


def canonical_frac(frac_ood) -> float:
  """The held-out fraction every split uses: the shortest decimal of frac_ood's float32 value.

  Runs carry frac_ood as float32, so validation, the host precompute and the device-side split
  all go through this (idempotent) map and agree; it is the value written for up to 6 digits.
  """
  return float(np.format_float_positional(np.float32(frac_ood), unique=True))


def split_sizes(M: int, K: int, frac_ood) -> tuple[int, int, int]:
  """(T, n_ood, n_train), n_ood = floor(T * frac_ood) in exact decimal arithmetic.

  The only place split sizes are computed; frac_ood may be the config's float or the device's
  float32, both give canonical_frac's decimal (0.9, not 0.899999976).
  """
  T = num_tasks(M, K)
  n_ood = math.floor(T * Fraction(repr(canonical_frac(frac_ood))))
  return T, n_ood, T - n_ood


def min_train_tasks(M: int, K: int) -> int:
  """Fewest tasks that can connect M modules: ceil((M-1)/(K-1)), at least ceil(M/K)."""
  return 1 if M == 1 else math.ceil((M - 1) / (K - 1))


def require_random(M: int, K: int, frac_ood: float) -> None:
  """random/equal: enough training tasks to be compositional and connected at all."""
  if M > 1 and K < 2:
    raise ConfigError("task.max_hotness", "random/equal supports need max_hotness >= 2 when "
                      "num_modules > 1: single-module tasks never connect modules")
  _, _, n_train = split_sizes(M, K, frac_ood)
  if n_train < min_train_tasks(M, K):
    raise ConfigError("task.frac_ood", f"leaves {n_train} training tasks; a compositional and "
                      f"connected support of {M} modules, at most {K} per task, needs at least "
                      f"{min_train_tasks(M, K)} (covering alone needs ceil(M/K) = {-(-M // K)})")


def require_ring(M: int, K: int, frac_ood: float | None = None) -> None:
  """connected/disconnected: K == 2 and an even M > 4."""
  if K != 2:
    raise ConfigError("task.max_hotness", f"connected/disconnected need max_hotness 2, got {K}")
  if M <= 4 or M % 2:
    raise ConfigError("task.num_modules",
                      f"connected/disconnected need an even num_modules > 4, got {M}")


def cut_size(M: int, K: int, frac_ood: float) -> int:
  """pseudo_random_disconnected: largest s in 1..M//2 whose cross subsets fit in n_ood."""
  _, n_ood, _ = split_sizes(M, K, frac_ood)
  fits = [s for s in range(1, M // 2 + 1) if num_cross(M, K, s) <= n_ood]
  if not fits:
    need = f"{num_cross(M, K, 1)} held-out tasks" if M > 1 else "2 modules"
    raise ConfigError("task.frac_ood", f"pseudo_random_disconnected holds out {n_ood} tasks, "
                      f"but the smallest cut needs {need}")
  return fits[-1]


def popular_count(M: int, K: int, frac_ood: float) -> int:
  """popular_modules: largest n whose touching subsets fit in n_train."""
  if M > 1 and K < 2:
    raise ConfigError("task.max_hotness", "popular_modules needs max_hotness >= 2 when "
                      "num_modules > 1: single-module tasks never connect modules")
  _, _, n_train = split_sizes(M, K, frac_ood)
  fits = [n for n in range(1, M + 1) if num_touching(M, K, n) <= n_train]
  if not fits:
    raise ConfigError("task.frac_ood", f"popular_modules trains on {n_train} tasks, but those "
                      f"touching module 0 alone number {num_touching(M, K, 1)}; lower frac_ood")
  return fits[-1]


def core_size(M: int, K: int, frac_ood: float) -> int:
  """unpopular_modules: largest core c >= 2 with T(c, K) + (M - c) <= n_train."""
  if K < 2:
    raise ConfigError("task.max_hotness",
                      "unpopular_modules pairs rare modules with the core: needs max_hotness >= 2")
  _, _, n_train = split_sizes(M, K, frac_ood)
  fits = [c for c in range(2, M + 1) if num_tasks(c, K) + M - c <= n_train]
  if not fits:
    raise ConfigError("task.frac_ood", f"unpopular_modules trains on {n_train} tasks, fewer than a "
                      f"2-module core plus one per rare module ({num_tasks(2, K) + M - 2})")
  return fits[-1]
