"""Width toward the paper's table model (hyperteacher), for the two encodings the CPU encoding
table does not show generalizing: the invertible NN and few-shot. OOD and ID R^2 against MLP
width (one depth) and, with --probe, the task- and input-decoder R^2, so the report shows which
way width moves them and, at the last doubling's gain, the width at which OOD R^2 would reach
0.9 (an extrapolation, labelled as one).

  python experiments/sweep.py --config=configs/sweeps/encoding_width.py:cpu \
      --sweep_dir=results/cpu/encoding_width --probe
  python experiments/report.py --sweep_dir=results/cpu/encoding_width
  python experiments/sweep.py --config=configs/sweeps/encoding_width.py:paper --sweep_dir=/x \
      --launcher=slurm --slurm_partition=gpu --probe

M=16, K=3, random support, frac_ood 0.25 (the setting of the paper's table). One program per
(encoding, width); seeds are vmapped.

Presets:
  paper: the two encodings at depth 4 x the authors' widths {128, 256, 512, 1024, 2048}, 3
    seeds, 300k steps (those programs of model_size.py:paper). GPUs.
  cpu: the two encodings at depth 4 x width {128, 256, 512}, 2 seeds, 8000 steps at the
    encoding table's learning rates (encoding_table.py:cpu, chosen there by ID at width 256:
    1e-2 for the invertible NN, 3e-3 for few-shot; one rate per encoding across widths, so the
    trend is width's alone). Width 512 is the widest a 40 min sweep on 2 cores affords; the
    paper's table model is 4x1024. The width-256 programs repeat two of encoding_table.py:cpu's
    with 2 of its 3 seeds (vmapped seeds do not depend on their neighbours: the same rows).
    Its measured time: results/cpu/NOTES.md.
  tiny: both encodings at depth 2 x width {16, 32}, 1 seed, 100 steps.
"""

import ml_collections

from compgen_jax.scaling import grid

PRESETS = ("paper", "cpu", "tiny")
ENCODINGS = ("invertible", "few_shot")


def get_config(preset: str = "tiny") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = ml_collections.ConfigDict()
  cfg.name = f"encoding_width_{preset}"
  task = grid.table_task()
  lr_for = {}
  if preset == "paper":
    cfg.base = "configs/hyperteacher.py:paper"
    cfg.overrides = {"num_seeds": 3, "task": task, "train": {"num_steps": 300_000}}
    depth, widths = 4, (128, 256, 512, 1024, 2048)
  elif preset == "cpu":
    cfg.base = "configs/hyperteacher.py:quick"
    cfg.overrides = {"num_seeds": 2, "task": task, **grid.cpu_fitting_recipe()}
    depth, widths = 4, (128, 256, 512)
    lr_for = {"few_shot": {"optim.learning_rate": 3e-3}}  # encoding_table.py:cpu's pilot
  elif preset == "tiny":
    cfg.base = "configs/hyperteacher.py:tiny"
    cfg.overrides = {"num_seeds": 1, "train": {"num_steps": 100}, "probe": {"num_tasks": 64}}
    depth, widths = 2, (16, 32)
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.programs = tuple({"encoding.name": e, "student.mlp.depth": depth, "student.mlp.width": w,
                        **lr_for.get(e, {})} for e in ENCODINGS for w in widths)
  cfg.lock()
  return cfg
