"""How nonlinear the invertible-NN encoding is (hyperteacher): OOD and ID R^2 and, with --probe,
the task- and input-decoder R^2 against `encoding.inn_init_scale`, the scale of its coupling
layers' initial weights. Our invertible row is calibrated to the paper's input-decoder R^2 of 0.56
(scale 1.05, docs/evaluation.md); the reference code's own init (0.1) is nearly linear (input
decoder 0.999). This sweep measures how much the row's OOD R^2 depends on that choice. Not a
claim of the paper.

  python experiments/sweep.py --config=configs/sweeps/encoding_nonlinearity.py:cpu \
      --sweep_dir=results/cpu/encoding_nonlinearity --probe
  python experiments/report.py --sweep_dir=results/cpu/encoding_nonlinearity

M=16, K=3, random support, frac_ood 0.25 (the table's setting). One program per scale; seeds
vmapped inside it.

Presets:
  paper: MLP 4x1024 (the table model), 3 seeds, 300k steps, the cpu preset's scales. GPUs.
  cpu: MLP 4x256 at the encoding table's recipe (8000 steps at lr 1e-2), 2 seeds, scales 0.1
    (the reference's init), 0.9, 1.05 (the calibrated default: encoding_width.py:cpu's
    invertible 4x256 program, the same config) and 1.5; input-decoder R^2 about 0.999 / 0.71 /
    0.57 / 0.37 at these scales (docs/evaluation.md). Its measured time: results/cpu/NOTES.md.
    Not in `make reproduce-cpu` (the 5 h budget): `make reproduce-cpu-encoding_nonlinearity`.
  tiny: MLP 2x16, 1 seed, 100 steps, scales 0.1 and 1.05.
"""

import ml_collections

from compgen_jax.analysis import paper
from compgen_jax.scaling import grid

PRESETS = ("paper", "cpu", "tiny")


def get_config(preset: str = "tiny") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = ml_collections.ConfigDict()
  cfg.name = f"encoding_nonlinearity_{preset}"
  task = grid.table_task()
  scales = (0.1, 0.9, 1.05, 1.5)
  if preset == "paper":
    cfg.base = "configs/hyperteacher.py:paper"
    cfg.overrides = {"num_seeds": 3, "task": task, "train": {"num_steps": 300_000}}
    depth, width = paper.TABLE_MODEL["student.mlp.depth"], paper.TABLE_MODEL["student.mlp.width"]
  elif preset == "cpu":
    cfg.base = "configs/hyperteacher.py:quick"
    cfg.overrides = {"num_seeds": 2, "task": task, **grid.cpu_fitting_recipe()}
    depth, width = 4, 256
  elif preset == "tiny":
    cfg.base = "configs/hyperteacher.py:tiny"
    cfg.overrides = {"num_seeds": 1, "train": {"num_steps": 100}, "probe": {"num_tasks": 64}}
    depth, width, scales = 2, 16, (0.1, 1.05)
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.programs = tuple({"encoding.name": "invertible", "encoding.inn_init_scale": s,
                        "student.mlp.depth": depth, "student.mlp.width": width} for s in scales)
  cfg.lock()
  return cfg
