"""The scaling experiment's sweep recipes, for its sweep config files (configs/sweeps/): products
of program axes, the held-out fractions a support can use at a given (M, K), the `cpu` presets'
shared training recipe and the setting of the paper's encoding table.

A held-out fraction that leaves too few training tasks is rejected by validation, and since
`sweep.frac_ood` is vmapped inside a program, one bad value would reject the whole program: the
paper's frac_ood lists are therefore cut per (M, K) to the values that validate. (The authors'
grids list every combination; those leaving fewer training tasks than a connected support needs
cannot be split and are left out here. Every kept value was checked to split for seeds 0-2.)
"""

import itertools

from compgen_jax.analysis import paper
from compgen_jax.tasks import supports
from compgen_jax.types import ConfigError


def cpu_fitting_recipe() -> dict:
  """The optim, train and evals overrides the `cpu` presets share (on their quick base: AdamW,
  warmup + cosine): 8000 steps at lr 1e-2, the pilot's recipe under which a student fits its
  training tasks on 2 cores (results/cpu/NOTES.md), evaluated and checkpointed every 2000
  steps. A fresh dict each call."""
  return {"optim": {"learning_rate": 1e-2},
          "train": {"num_steps": 8000, "chunk_size": 500, "log_every": 500,
                    "checkpoint_every": 2000},
          "evals": {"id": {"every": 2000}, "ood": {"every": 2000}}}


def preference_fitting_recipe(task: dict) -> dict:
  """cpu_fitting_recipe for the preference students, in a world they fit: 16000 steps, and the
  sweep's `task` overrides with 2 objects per scene (the paper's 4). Piloted on 2 cores
  (results/cpu/NOTES.md): with 4 objects a 2x256 student needs about 50k-280k steps to reach ID
  whole-trajectory accuracy 0.9 (results/cpu/preference_steps); with 2 it reaches 0.91 / 0.94 at
  69 / 10 training tasks after 16000. A fresh dict each call."""
  recipe = cpu_fitting_recipe()
  recipe["train"]["num_steps"] = 16000
  return {**recipe, "task": {**task, "num_objects": 2}}


def table_task() -> dict:
  """The task overrides of the paper's encoding-table setting (paper.TABLE_SETTING: M=16, K=3,
  frac_ood 0.25; random support), shared by the sweeps run there. A fresh dict each call."""
  t = paper.TABLE_SETTING
  return {"num_modules": t["task.num_modules"], "max_hotness": t["task.max_hotness"],
          "support": "random", "frac_ood": t["frac_ood"]}


def product(axes: dict) -> tuple[dict, ...]:
  """{"student.mlp.width": (8, 16), "student.mlp.depth": (2,)} -> one dict of dotted overrides per
  combination (the last axis fastest)."""
  return tuple(dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values()))


def valid_fracs(support: str, M: int, K: int, fracs) -> tuple[float, ...]:
  """The values of `fracs` that supports.validate accepts for (support, M, K), in order."""
  out = []
  for frac in fracs:
    try:
      supports.validate(support, M, K, frac)
    except ConfigError:
      continue
    out.append(frac)
  return tuple(out)


def scaling_programs(support: str, Ms, Ks, fracs, min_fracs: int = 1, **extra) -> tuple[dict, ...]:
  """One program per (M, K) with K <= M, carrying the valid held-out fractions of `fracs` as
  its vmapped sweep.frac_ood; (M, K) with fewer than `min_fracs` valid values are left out.
  `extra` (dotted names, values fixed) is added to every program after M and K."""
  programs = []
  for M, K in itertools.product(Ms, Ks):
    valid = valid_fracs(support, M, K, fracs) if K <= M else ()
    if len(valid) >= max(min_fracs, 1):
      programs.append({"task.num_modules": M, "task.max_hotness": K, **extra,
                       "sweep.frac_ood": valid})
  return tuple(programs)


def support_programs(M: int, K: int, fracs, ring_hotness: int = 2,
                     fracs_for: dict | None = None) -> tuple[dict, ...]:
  """One program per task-support strategy (supports.STRATEGIES order) for a sweep whose
  overrides set (M, K): strategies that follow frac_ood get the values of `fracs` (or of
  fracs_for[strategy] where given) valid for them vmapped (left out if none is), those that
  ignore it (supports.IGNORE_FRAC) one run per seed; connected / disconnected run at
  K = ring_hotness (they need K = 2)."""
  fracs_for = fracs_for or {}
  unknown = sorted(set(fracs_for) - set(supports.STRATEGIES))
  if unknown:
    raise ValueError(f"fracs_for: unknown strategies {unknown}; "
                     f"allowed: {', '.join(supports.STRATEGIES)}")
  programs = []
  for name in supports.STRATEGIES:
    if name in ("connected", "disconnected"):
      programs.append({"task.max_hotness": ring_hotness, "task.support": name})
    elif name in supports.IGNORE_FRAC:
      programs.append({"task.support": name})
    elif valid := valid_fracs(name, M, K, fracs_for.get(name, fracs)):
      programs.append({"task.support": name, "sweep.frac_ood": valid})
  return tuple(programs)
