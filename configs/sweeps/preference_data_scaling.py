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
  cpu: F=8, M=8, K=3, frac_ood {0.25, 0.5, 0.75, 0.9} (69 / 46 / 23 / 9 training tasks) x 2
    seeds, MLP 2x256 with the scale trend at 2x64 and 2x128 = 3 programs (24 runs), 8000 steps
    at lr 1e-2 (warmup + cosine, batch 128 tasks). Piloted at 2x256, one seed: at 69 tasks ID /
    OOD per-action accuracy 0.913 / 0.874 after 4000 steps at lr 1e-2 (0.908 / 0.868 at 3e-3,
    0.861 / 0.832 at 1e-3) and 0.942 / 0.906 after 8000 (whole trajectory 0.744 / 0.654); at 23
    tasks 0.950 / 0.894 (0.758 / 0.604). Width 1024 (the paper's) costs about 5x a 2x256 step
    here. Deviations from the paper, for 2 CPU cores: one (M, K), F=8 features (32), widths <=
    256 (1024), 8000 steps (3M).
    Measured 21.5 min on 2 cores (420-872 s per program, with probes, two at a time, each
    on one core; `make -k reproduce-cpu` of 2026-12-02; 32 min one at a time on the earlier
    sessions' slower machine).
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
    cfg.overrides = {"num_seeds": 2, "task": {"support": "random", "num_features": 8},
                     **grid.cpu_fitting_recipe()}
    cfg.programs = tuple(
        program for width in (64, 128, 256)
        for program in grid.scaling_programs("random", (8,), (3,), (0.25, 0.5, 0.75, 0.9),
                                              **{"student.mlp.width": width}))
  elif preset == "tiny":
    cfg.base = "configs/preference.py:tiny"
    cfg.overrides = {"num_seeds": 1, "task": {"num_features": 5}, "train": {"num_steps": 100}}
    cfg.programs = grid.scaling_programs("random", (4, 5), (2,), (0.25, 0.5))
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.lock()
  return cfg
