"""Demo sweep: MLP student width x depth on the hyperteacher; one program per (width, depth).

  python experiments/sweep.py --config=configs/sweeps/width_depth_demo.py:tiny --sweep_dir=/tmp/wd
  python experiments/sweep.py --config=configs/sweeps/width_depth_demo.py:cpu --sweep_dir=/tmp/wd
  python experiments/sweep.py --config=configs/sweeps/width_depth_demo.py:paper --sweep_dir=/x \
      --launcher=slurm --slurm_partition=gpu

Presets: paper (the paper's hyperteacher, 3 seeds x 3 held-out fractions per program; GPU),
cpu (the quick preset; 2 CPU cores, minutes per program), tiny (seconds per program).
Width and depth change array shapes, so each pair is its own program; seeds and held-out
fractions are vmapped inside it.
"""

import itertools

import ml_collections

PRESETS = ("paper", "cpu", "tiny")


def get_config(preset: str = "tiny") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = ml_collections.ConfigDict()
  cfg.name = f"width_depth_demo_{preset}"
  if preset == "paper":
    cfg.base = "configs/hyperteacher.py:paper"
    cfg.overrides = {"sweep": {"frac_ood": (0.25, 0.5, 0.75)}}
    widths, depths = (256, 1024, 4096), (2, 4, 6)
  elif preset == "cpu":
    cfg.base = "configs/hyperteacher.py:quick"
    cfg.overrides = {"train": {"num_steps": 2000}}
    widths, depths = (64, 256), (1, 2)
  elif preset == "tiny":
    cfg.base = "configs/hyperteacher.py:tiny"
    cfg.overrides = {"num_seeds": 1, "train": {"num_steps": 100}}
    widths, depths = (16, 32), (1, 2)
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.programs = tuple({"student.mlp.width": w, "student.mlp.depth": d}
                       for w, d in itertools.product(widths, depths))
  cfg.lock()
  return cfg
