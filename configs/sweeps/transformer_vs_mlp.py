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
  cpu: M=8, K=3, frac_ood {0.25, 0.5, 0.75} (69 / 46 / 23 training tasks) x 3 seeds, at two
    model sizes: transformer 2 layers d_model 32 ffw 128 (26.1k parameters) vs MLP 4x86 (26.0k),
    and d_model 64 ffw 256 (101.3k) vs MLP 4x176 (100.7k) = 4 programs (36 runs). Each student
    family has its own piloted recipe (AdamW, warmup 200 + cosine, batch 128 x 16): the
    transformer 3000 steps at lr 1e-2 (pilot at d_model 64, 69 tasks, one seed, 2000 steps: ID
    / OOD 0.851 / 0.832 at lr 1e-3, 0.908 / 0.888 at 3e-3, 0.983 / 0.973 at 1e-2), the MLP the
    data-scaling recipe, 8000 steps at lr 1e-2 (more steps than the transformer: a transformer
    step costs about 4x an MLP's here). Deviations from the paper, for 2 CPU cores: M=8, 2-layer
    students of 26k-101k parameters (the paper's 400k-3.2M), 3000 / 8000 steps (300k).
    Its measured time: results/cpu/NOTES.md.
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
        {"student.name": "mlp", "student.mlp.width": 1024, "student.mlp.depth": 4},
        {"student.name": "transformer", "student.transformer.num_layers": 2,
         "student.transformer.d_model": 128, "student.transformer.ffw_dim": 512},
        {"student.name": "mlp", "student.mlp.width": 357, "student.mlp.depth": 4},
    )
  elif preset == "cpu":
    cfg.base = "configs/hyperteacher.py:quick"
    cfg.overrides = {"num_seeds": 3, "task": {"num_modules": 8, "max_hotness": 3},
                     "sweep": {"frac_ood": (0.25, 0.5, 0.75)},
                     "student": {"transformer": {"num_layers": 2, "num_heads": 4}},
                     "optim": {"learning_rate": 1e-2},
                     "train": {"chunk_size": 500, "log_every": 500, "checkpoint_every": 1000},
                     "evals": {"id": {"every": 1000}, "ood": {"every": 1000}}}
    transformer = {"student.name": "transformer", "train.num_steps": 3000}
    mlp = {"student.name": "mlp", "student.mlp.depth": 4, "train.num_steps": 8000}
    cfg.programs = (
        {**transformer, "student.transformer.d_model": 32, "student.transformer.ffw_dim": 128},
        {**mlp, "student.mlp.width": 86},
        {**transformer, "student.transformer.d_model": 64, "student.transformer.ffw_dim": 256},
        {**mlp, "student.mlp.width": 176},
    )
  elif preset == "tiny":
    cfg.base = "configs/hyperteacher.py:tiny"
    cfg.overrides = {"num_seeds": 1, "sweep": {"frac_ood": (0.25, 0.5)},
                     "train": {"num_steps": 100}}
    cfg.programs = ({"student.name": "transformer"},
                    {"student.name": "mlp", "student.mlp.width": 124, "student.mlp.depth": 2})
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.lock()
  return cfg
