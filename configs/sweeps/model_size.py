"""Model size x task encoding (hyperteacher): OOD R^2 against MLP width and depth for each of the
paper's six encodings, and (with --probe) the task- and input-decoder R^2 of its encoding table.

  python experiments/sweep.py --config=configs/sweeps/model_size.py:cpu \
      --sweep_dir=results/cpu/model_size --probe
  python experiments/report.py --sweep_dir=results/cpu/model_size
  python experiments/sweep.py --config=configs/sweeps/model_size.py:paper --sweep_dir=/x \
      --launcher=slurm --slurm_partition=gpu --probe

The paper's "language" encoding is the reference's integer vector, our `tokens` (the authors'
sweep lists `tokens`); our token-sequence `language` encoding is not part of the paper's table.
M=16, K=3, random support, frac_ood 0.25 (the setting of the paper's table). One program per
(encoding, depth, width); seeds are vmapped.

Presets:
  paper: the authors' grid (sweeps/scaling-model_hyperteacher.yaml): 6 encodings x depth {2, 4}
    x width {128, 256, 512, 1024, 2048} = 60 programs x 3 seeds (180 runs), 300k steps. GPUs.
  cpu: 6 encodings x depth {2, 4} x width {32, 128} = 24 programs x 2 seeds (48 runs), 2000
    steps, quick-preset optimiser. Estimated 22 min on 2 cores (measured 27-56 s per program
    for the vector encodings, 72-126 s for few_shot, whose 1600-wide input feeds the first
    layer at every sample; 7 s per probe).
  tiny: identity and few_shot x depth 2 x width {16, 32} = 4 programs, 1 seed, 100 steps.
"""

import ml_collections

from compgen_jax.sweeps import grid

PRESETS = ("paper", "cpu", "tiny")
ENCODINGS = ("identity", "orthogonal", "tokens", "invertible", "interval_shuffle", "few_shot")


def get_config(preset: str = "tiny") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = ml_collections.ConfigDict()
  cfg.name = f"model_size_{preset}"
  task = {"num_modules": 16, "max_hotness": 3, "support": "random", "frac_ood": 0.25}
  if preset == "paper":
    cfg.base = "configs/hyperteacher.py:paper"
    cfg.overrides = {"num_seeds": 3, "task": task, "train": {"num_steps": 300_000}}
    encodings, depths, widths = ENCODINGS, (2, 4), (128, 256, 512, 1024, 2048)
  elif preset == "cpu":
    cfg.base = "configs/hyperteacher.py:quick"
    cfg.overrides = {"num_seeds": 2, "task": task, "train": {"num_steps": 2000}}
    encodings, depths, widths = ENCODINGS, (2, 4), (32, 128)
  elif preset == "tiny":
    cfg.base = "configs/hyperteacher.py:tiny"
    cfg.overrides = {"num_seeds": 1, "train": {"num_steps": 100},
                     "probe": {"num_tasks": 64}}
    encodings, depths, widths = ("identity", "few_shot"), (2,), (16, 32)
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.programs = grid.product({"encoding.name": encodings, "student.depth": depths,
                               "student.width": widths})
  cfg.lock()
  return cfg
