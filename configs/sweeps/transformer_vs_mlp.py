"""Transformer vs MLP at matched parameter counts (hyperteacher): OOD R^2 against the number of
training tasks, for each student.

  python experiments/sweep.py --config=configs/sweeps/transformer_vs_mlp.py:cpu \
      --sweep_dir=results/cpu/transformer_vs_mlp
  python experiments/report.py --sweep_dir=results/cpu/transformer_vs_mlp
  python experiments/sweep.py --config=configs/sweeps/transformer_vs_mlp.py:paper --sweep_dir=/x \
      --launcher=slurm --slurm_partition=gpu

Each pair is a transformer and an MLP with (almost) the same number of parameters (the report
counts them from the workdirs' configs); one program per student, with the held-out fractions
(numbers of training tasks) and seeds vmapped. Random support, identity encoding.

Presets:
  paper: M=16, K=3, frac_ood {0.25, 0.5, 0.75, 0.9, 0.95, 0.98} (522 ... 14 training tasks) x
    3 seeds; transformer 4 layers d_model 256 (3.16M parameters) vs MLP 4x1024 (3.20M), and
    transformer 2 layers d_model 128 (400k) vs MLP 4x357 (401k) = 4 programs (72 runs), 300k
    steps. For GPUs.
  cpu: M=8, K=3, frac_ood {0.5, 0.75, 0.9375} (46 / 23 / 6 training tasks) x 2 seeds;
    transformer 2 layers d_model 64 ffw 256 (101.8k) vs MLP 4x176 (102.1k) = 2 programs (12
    runs), 2000 steps, quick-preset optimiser. Estimated 14 min on 2 cores (measured 50 ms per
    run-step for the transformer, 14 ms for the MLP: the transformer is three quarters of it).
  tiny: the tiny preset's transformer (17.0k) vs MLP 2x124, frac_ood {0.25, 0.5}, 1 seed,
    100 steps.
"""

import ml_collections

PRESETS = ("paper", "cpu", "tiny")


def get_config(preset: str = "tiny") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = ml_collections.ConfigDict()
  cfg.name = f"transformer_vs_mlp_{preset}"
  if preset == "paper":
    cfg.base = "configs/hyperteacher.py:paper"
    cfg.overrides = {"num_seeds": 3, "task": {"num_modules": 16, "max_hotness": 3},
                     "sweep": {"frac_ood": (0.25, 0.5, 0.75, 0.9, 0.95, 0.98)},
                     "train": {"num_steps": 300_000}}
    cfg.programs = (
        {"student.name": "transformer"},
        {"student.name": "mlp", "student.width": 1024, "student.depth": 4},
        {"student.name": "transformer", "student.num_layers": 2, "student.d_model": 128,
         "student.ffw_dim": 512},
        {"student.name": "mlp", "student.width": 357, "student.depth": 4},
    )
  elif preset == "cpu":
    cfg.base = "configs/hyperteacher.py:quick"
    cfg.overrides = {"num_seeds": 2, "task": {"num_modules": 8, "max_hotness": 3},
                     "sweep": {"frac_ood": (0.5, 0.75, 0.9375)},
                     "student": {"num_layers": 2, "d_model": 64, "num_heads": 4, "ffw_dim": 256},
                     "train": {"num_steps": 2000}}
    cfg.programs = ({"student.name": "transformer"},
                    {"student.name": "mlp", "student.width": 176, "student.depth": 4})
  elif preset == "tiny":
    cfg.base = "configs/hyperteacher.py:tiny"
    cfg.overrides = {"num_seeds": 1, "sweep": {"frac_ood": (0.25, 0.5)},
                     "train": {"num_steps": 100}}
    cfg.programs = ({"student.name": "transformer"},
                    {"student.name": "mlp", "student.width": 124, "student.depth": 2})
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.lock()
  return cfg
