"""Data scaling (preference grid world): OOD per-action and whole-trajectory accuracy against the
number of training tasks, per (M, K).

  python experiments/sweep.py --config=configs/sweeps/preference_data_scaling.py:cpu \
      --sweep_dir=results/cpu/preference_data_scaling --probe
  python experiments/report.py --sweep_dir=results/cpu/preference_data_scaling
  python experiments/sweep.py --config=configs/sweeps/preference_data_scaling.py:paper \
      --sweep_dir=/x --launcher=slurm --slurm_partition=gpu --probe

One program per (M, K); held-out fractions and seeds vmapped inside it, each fraction kept only
where it leaves a valid support (grid.py). Random support, identity encoding.

Presets:
  paper: the authors' grid (sweeps/scaling-data_preference.yaml): F=32 features, M in {8, 16, 24,
    32} x K in 2..7 = 24 programs, frac_ood in {0.125, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98} (4-7
    valid) x 3 seeds (471 runs), MLP 2x1024, AdamW lr 1e-4, 3M steps. For GPUs.
  cpu: F=8, M in {6, 8} x K in {2, 3} = 4 programs, frac_ood in {0.25, 0.5, 0.75, 0.9, 0.95}
    (3-5 valid, n_train 3..69) x 1 seed (16 runs), MLP 2x128, 3000 steps, quick-preset
    optimiser. Estimated 10 min on 2 cores (measured 176 s for the 5-run program: drawing the
    Q-iteration demonstrations of 128 tasks dominates a step).
  tiny: F=5, M in {4, 5} x K = 2, frac_ood {0.25, 0.5}, 1 seed, 100 steps.
"""

import ml_collections

from compgen_jax.sweeps import grid

PRESETS = ("paper", "cpu", "tiny")


def get_config(preset: str = "tiny") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = ml_collections.ConfigDict()
  cfg.name = f"preference_data_scaling_{preset}"
  if preset == "paper":
    cfg.base = "configs/preference.py:paper"
    cfg.overrides = {"num_seeds": 3, "task": {"support": "random", "num_features": 32},
                     "encoding": {"name": "identity"}}
    cfg.programs = grid.scaling_programs("random", (8, 16, 24, 32), range(2, 8),
                                         (0.125, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98))
  elif preset == "cpu":
    cfg.base = "configs/preference.py:quick"
    cfg.overrides = {"num_seeds": 1, "task": {"support": "random", "num_features": 8},
                     "student": {"width": 128}, "train": {"num_steps": 3000}}
    cfg.programs = grid.scaling_programs("random", (6, 8), (2, 3), (0.25, 0.5, 0.75, 0.9, 0.95))
  elif preset == "tiny":
    cfg.base = "configs/preference.py:tiny"
    cfg.overrides = {"num_seeds": 1, "task": {"num_features": 5}, "train": {"num_steps": 100}}
    cfg.programs = grid.scaling_programs("random", (4, 5), (2,), (0.25, 0.5))
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.lock()
  return cfg
