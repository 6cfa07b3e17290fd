"""Model size x task encoding (hyperteacher): OOD R^2 against MLP width and depth for each of the
paper's six encodings, and (with --probe) the task- and input-decoder R^2 of each run. The paper's
encoding table itself is configs/sweeps/encoding_table.py, at a wider student.

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
  cpu: 6 encodings x (depth 4 x width {32, 64, 128} + depth 2 x width 128) = 24 programs x 2
    seeds, 3 at 4x128 (54 runs; 4x128 was the encoding table's student until the tokens and
    interval-shuffle students were found to underfit there: encoding_table.py), 8000 steps at
    lr 1e-2 (warmup + cosine), the data-scaling sweep's student recipe (its pilot: 4x128
    reaches ID 0.927 / OOD 0.912 with the identity encoding here).
    Deviations from the paper, for 2 CPU cores: widths up to 128 (the paper's 128..2048), 8000
    steps (300k).
  tiny: identity and few_shot x depth 2 x width {16, 32} = 4 programs, 1 seed, 100 steps.
"""

import ml_collections

from compgen_jax.scaling import grid

PRESETS = ("paper", "cpu", "tiny")
ENCODINGS = ("identity", "orthogonal", "tokens", "invertible", "interval_shuffle", "few_shot")


def get_config(preset: str = "tiny") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = ml_collections.ConfigDict()
  cfg.name = f"model_size_{preset}"
  task = grid.table_task()
  if preset == "paper":
    cfg.base = "configs/hyperteacher.py:paper"
    cfg.overrides = {"num_seeds": 3, "task": task, "train": {"num_steps": 300_000}}
    programs = grid.product({"encoding.name": ENCODINGS, "student.mlp.depth": (2, 4),
                             "student.mlp.width": (128, 256, 512, 1024, 2048)})
  elif preset == "cpu":
    cfg.base = "configs/hyperteacher.py:quick"
    cfg.overrides = {"num_seeds": 2, "task": task, **grid.cpu_fitting_recipe()}
    # Widths at depth 4 (three sizes: the trend), depth 2 at the widest (the depth comparison).
    programs = tuple({"encoding.name": e, "student.mlp.depth": d, "student.mlp.width": w,
                      **({"num_seeds": 3} if (d, w) == (4, 128) else {})}
                     for e in ENCODINGS for d, w in ((4, 32), (4, 64), (4, 128), (2, 128)))
  elif preset == "tiny":
    cfg.base = "configs/hyperteacher.py:tiny"
    cfg.overrides = {"num_seeds": 1, "train": {"num_steps": 100},
                     "probe": {"num_tasks": 64}}
    programs = grid.product({"encoding.name": ("identity", "few_shot"), "student.mlp.depth": (2,),
                             "student.mlp.width": (16, 32)})
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.programs = programs
  cfg.lock()
  return cfg
