"""Image composition (configs/images.py): one experiments/train.py program per MLP width;
seeds x coverage are vmapped inside each.

  python experiments/sweep.py --config=configs/sweeps/images.py:cpu --sweep_dir=results/cpu/images \
      --parallel=2 --evaluate --probe              # train, evaluate, probe each width
  python experiments/report.py --dir=results/cpu/images     # report.md, figures
  make reproduce-cpu-images                        # both

Presets: paper (the paper preset of configs/images.py at widths 512..4096; GPU), cpu (the cpu
preset at widths 256 and 512, for 2 cores, two programs at a time; its measured time:
results/cpu/NOTES.md), tiny (tests).
Evaluation and probes read each program's latest checkpoint (the report's step).
"""

import ml_collections

PRESETS = ("paper", "cpu", "tiny")
WIDTHS = {"paper": (512, 1024, 2048, 4096), "cpu": (256, 512), "tiny": (32, 64)}


def get_config(preset: str = "cpu") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  if preset not in PRESETS:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg = ml_collections.ConfigDict()
  cfg.name = "images"
  cfg.base = f"configs/images.py:{preset}"
  cfg.overrides = {}
  cfg.programs = tuple({"model.width": w} for w in WIDTHS[preset])
  cfg.lock()
  return cfg
