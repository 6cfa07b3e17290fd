"""Model size x task encoding (preference grid world): OOD per-action and whole-trajectory
accuracy against MLP width and depth for each encoding, and (with --probe) decodability of z.

  python experiments/sweep.py --config=configs/sweeps/preference_model_size.py:cpu \
      --sweep_dir=results/cpu/preference_model_size --probe
  python experiments/report.py --sweep_dir=results/cpu/preference_model_size
  python experiments/sweep.py --config=configs/sweeps/preference_model_size.py:paper \
      --sweep_dir=/x --launcher=slurm --slurm_partition=gpu --probe

Five encodings: the paper's six less few-shot, which is not defined for this family; `tokens`
is the reference's integer vector (the paper's "language"). Random support, frac_ood 0.25.

Presets:
  paper: the authors' grid (sweeps/scaling-model_preference.yaml): F=16, M=16, K=3, 5 encodings x
    depth {2, 4} x width {16, 32, ..., 2048} = 80 programs x 3 seeds (240 runs), lr 1e-4, 3M
    steps. For GPUs.
  cpu: F=8, M=8, K=3, 5 encodings x depth {2, 4} x width {32, 128} = 20 programs x 1 seed,
    2500 steps, quick-preset optimiser. Estimated 16 min on 2 cores (measured 37-63 s per
    program at 3000 steps, most of it drawing demonstrations; 7 s probing each).
  tiny: identity and tokens x depth 2 x width {16, 32}, 1 seed, 100 steps.
"""

import ml_collections

from compgen_jax.sweeps import grid

PRESETS = ("paper", "cpu", "tiny")
ENCODINGS = ("identity", "orthogonal", "tokens", "invertible", "interval_shuffle")


def get_config(preset: str = "tiny") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = ml_collections.ConfigDict()
  cfg.name = f"preference_model_size_{preset}"
  if preset == "paper":
    cfg.base = "configs/preference.py:paper"
    cfg.overrides = {"num_seeds": 3, "task": {"num_modules": 16, "max_hotness": 3,
                                              "num_features": 16, "frac_ood": 0.25}}
    encodings, depths = ENCODINGS, (2, 4)
    widths = (16, 32, 64, 128, 256, 512, 1024, 2048)
  elif preset == "cpu":
    cfg.base = "configs/preference.py:quick"
    cfg.overrides = {"num_seeds": 1, "task": {"num_modules": 8, "max_hotness": 3,
                                              "num_features": 8, "frac_ood": 0.25},
                     "train": {"num_steps": 2500}}
    encodings, depths, widths = ENCODINGS, (2, 4), (32, 128)
  elif preset == "tiny":
    cfg.base = "configs/preference.py:tiny"
    cfg.overrides = {"num_seeds": 1, "train": {"num_steps": 100}, "probe": {"num_tasks": 64}}
    encodings, depths, widths = ("identity", "tokens"), (2,), (16, 32)
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.programs = grid.product({"encoding.name": encodings, "student.depth": depths,
                               "student.width": widths})
  cfg.lock()
  return cfg
