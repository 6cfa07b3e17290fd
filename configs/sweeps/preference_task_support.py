"""Task support (preference grid world): OOD per-action and whole-trajectory accuracy of every
task-support strategy at matched budgets.

  python experiments/sweep.py --config=configs/sweeps/preference_task_support.py:cpu \
      --sweep_dir=results/cpu/preference_task_support
  python experiments/report.py --sweep_dir=results/cpu/preference_task_support
  python experiments/sweep.py --config=configs/sweeps/preference_task_support.py:paper \
      --sweep_dir=/x --launcher=slurm --slurm_partition=gpu

One program per strategy: those that follow frac_ood get {0.25, 0.5, 0.75} vmapped (the values
valid at that (M, K)), non_compositional one run per seed, connected / disconnected at K=2.
Identity encoding.

Presets:
  paper: the authors' six strategies (sweeps/task-support_preference.yaml, frac_ood 0.25) plus
    connected / disconnected, F=16, M=16, K=3, frac_ood {0.25, 0.5, 0.75} = 8 programs x 3
    seeds (54 runs), MLP 2x1024, lr 1e-4, 3M steps. For GPUs.
  cpu: F=8, M=8, K=3 = 8 programs x 1 seed (16 runs), MLP 2x128, 3000 steps, quick-preset
    optimiser. Estimated 14 min on 2 cores (measured 143 s for a 3-run program).
  tiny: F=6, M=6, K=2, frac_ood 0.25 where valid, 1 seed, 100 steps.
"""

import ml_collections

from compgen_jax.sweeps import grid

PRESETS = ("paper", "cpu", "tiny")
FRACS = (0.25, 0.5, 0.75)


def get_config(preset: str = "tiny") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = ml_collections.ConfigDict()
  cfg.name = f"preference_task_support_{preset}"
  if preset == "paper":
    cfg.base = "configs/preference.py:paper"
    cfg.overrides = {"num_seeds": 3, "encoding": {"name": "identity"},
                     "task": {"num_modules": 16, "max_hotness": 3, "num_features": 16,
                              "frac_ood": 0.25}}
    cfg.programs = grid.support_programs(16, 3, FRACS)
  elif preset == "cpu":
    cfg.base = "configs/preference.py:quick"
    cfg.overrides = {"num_seeds": 1, "encoding": {"name": "identity"},
                     "task": {"num_modules": 8, "max_hotness": 3, "num_features": 8,
                              "frac_ood": 0.25},
                     "student": {"width": 128}, "train": {"num_steps": 3000}}
    cfg.programs = grid.support_programs(8, 3, FRACS)
  elif preset == "tiny":
    cfg.base = "configs/preference.py:tiny"
    cfg.overrides = {"num_seeds": 1, "task": {"num_modules": 6, "max_hotness": 2,
                                              "num_features": 6, "frac_ood": 0.25},
                     "train": {"num_steps": 100}}
    cfg.programs = grid.support_programs(6, 2, (0.25,))
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.lock()
  return cfg
