"""Training steps for the invertible-NN encoding (hyperteacher): at the width where its student
fits (MLP 4x256), does a longer schedule close its ID - OOD gap and raise its task decoder, which
width does not (configs/sweeps/encoding_width.py)? ID and OOD R^2 and, with --probe, the task-
and input-decoder R^2 against the schedule length. Not a claim of the paper: it asks whether the
paper's 300k steps, rather than its width, stand behind its invertible-NN row.

  python experiments/sweep.py --config=configs/sweeps/encoding_steps.py:cpu \
      --sweep_dir=results/cpu/encoding_steps --probe
  python experiments/report.py --sweep_dir=results/cpu/encoding_steps

One program per schedule length (each with its own warmup + cosine decay to its last step);
seeds vmapped inside it. M=16, K=3, random support, frac_ood 0.25 (the table's setting).

Presets:
  paper: MLP 4x1024 (the table model), 3 seeds, at 75k, 150k and 300k steps (the paper's). GPUs.
  cpu: MLP 4x256 at the encoding table's recipe (lr 1e-2, warmup + cosine), 8000 (the table's
    schedule), 16000 and 32000 steps, 2 seeds = 3 programs (6 runs). The 8000-step program is
    encoding_width.py:cpu's invertible 4x256 program (the same config: the same rows).
    Its measured time: results/cpu/NOTES.md. Not in `make reproduce-cpu` (the 5 h budget):
    `make reproduce-cpu-encoding_steps`.
  tiny: MLP 2x16, 1 seed, 50 and 100 steps.
"""

import ml_collections

from compgen_jax.analysis import paper
from compgen_jax.scaling import grid

PRESETS = ("paper", "cpu", "tiny")


def get_config(preset: str = "tiny") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = ml_collections.ConfigDict()
  cfg.name = f"encoding_steps_{preset}"
  task = grid.table_task()
  if preset == "paper":
    cfg.base = "configs/hyperteacher.py:paper"
    cfg.overrides = {"num_seeds": 3, "task": task}
    depth, width = paper.TABLE_MODEL["student.mlp.depth"], paper.TABLE_MODEL["student.mlp.width"]
    steps = (75_000, 150_000, 300_000)
  elif preset == "cpu":
    cfg.base = "configs/hyperteacher.py:quick"
    cfg.overrides = {"num_seeds": 2, "task": task, **grid.cpu_fitting_recipe()}
    depth, width, steps = 4, 256, (8000, 16000, 32000)
  elif preset == "tiny":
    cfg.base = "configs/hyperteacher.py:tiny"
    cfg.overrides = {"num_seeds": 1, "probe": {"num_tasks": 64},
                     "evals": {"id": {"every": 50}, "ood": {"every": 50}}}
    depth, width, steps = 2, 16, (50, 100)
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.programs = tuple({"encoding.name": "invertible", "student.mlp.depth": depth,
                        "student.mlp.width": width, "train.num_steps": s} for s in steps)
  cfg.lock()
  return cfg
