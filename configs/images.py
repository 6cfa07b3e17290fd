"""Image composition: a conditional flow-matching model on synthetic compositional scenes, trained
on some attribute combinations and checked exactly (a detector) on held-out ones.

  python experiments/train.py --config=configs/images.py:tiny --workdir=/tmp/img
  python experiments/evaluate.py --workdir=/tmp/img           # latest checkpoint (--step, --every)
  python experiments/probe.py --workdir=/tmp/img
  python experiments/report.py --dir=/tmp/img                 # report.md and figures
  python experiments/train.py --config=configs/images.py:paper --workdir=/scratch/img \
      --config.model.name=conv

One program: seeds x split.coverage are one vmapped program of one model shape. The widths of
the experiment are one program each, launched by the sweep binary (configs/sweeps/images.py):

  python experiments/sweep.py --config=configs/sweeps/images.py:cpu \
      --sweep_dir=results/cpu/images --parallel=2 --evaluate --probe
  python experiments/report.py --dir=results/cpu/images

Presets: paper (GPU: 2 x 2 slots of 6 shapes x 6 colours in 32 x 32 images, coverage on a log
grid, 5 seeds; the sweep adds MLP widths 512 to 4096), cpu (1 x 2 slots of 4 shapes x 4 colours
in 16 x 16 images, coverage 6 % to 50 %, 3 seeds; the sweep: widths 256 and 512), tiny (tests).
"""

import ml_collections

from compgen_jax.images import detector, model, sampler, scenes

PRESETS = ("paper", "cpu", "tiny")


def base() -> ml_collections.ConfigDict:
  cfg = ml_collections.ConfigDict()
  cfg.app = "images"  # apps.APPS: what experiments/train.py runs
  cfg.seed = 0
  cfg.num_seeds = 3
  cfg.scene = scenes.default_config()
  cfg.split = ml_collections.ConfigDict(dict(
      strategy="random", coverage=(0.0625, 0.125, 0.25, 0.5), max_retries=1000))
  cfg.model = model.default_config()
  cfg.flow = ml_collections.ConfigDict(dict(cond_dropout=0.1, ema_decay=0.999))
  cfg.optim = ml_collections.ConfigDict(dict(
      learning_rate=1e-3, weight_decay=0.0, b1=0.9, b2=0.999, schedule="warmup_cosine",
      warmup_steps=200, end_factor=0.05))
  cfg.train = ml_collections.ConfigDict(dict(
      num_steps=6000, batch_size=128, chunk_size=250, log_every=50, checkpoint_every=1000,
      max_checkpoints=2, progress=True,
      writers=("jsonl",)))  # metric sinks (training.config): add "tensorboard" for event files
  cfg.sampler = sampler.default_config()
  cfg.detector = detector.default_config()
  # Evaluation: num_prompts prompts per split (ID: training combinations; OOD: held out), each
  # sampled samples_per_prompt times; the grid PNG shows grid_prompts held-out prompts.
  cfg.eval = ml_collections.ConfigDict(dict(num_prompts=128, samples_per_prompt=4,
                                            grid_prompts=8, grid_samples=8))
  # Probes: fitted on num_fit samples of training combinations ('all'), and on num_fit samples of
  # a fixed control_combos of them ('fixed': probe data that does not grow with coverage); scored
  # on num_eval samples of held-out combinations, at the sampler steps in `steps` (0: t = 1).
  cfg.probe = ml_collections.ConfigDict(dict(num_fit=512, num_eval=256, control_combos=12,
                                             steps=(0, 5, 10, 15), lambdas=(1.0,)))
  return cfg


def get_config(preset: str = "cpu") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = base()
  if preset == "paper":
    cfg.num_seeds = 5
    cfg.scene.update(image_size=32, grid=(2, 2), num_shapes=6, num_colours=6, jitter=4)
    cfg.split.coverage = (0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256)
    cfg.model.update(width=1024, depth=4)
    cfg.train.update(num_steps=100_000, batch_size=256, chunk_size=1000, log_every=100,
                     checkpoint_every=10_000)
    cfg.eval.update(num_prompts=512, samples_per_prompt=4)
    cfg.probe.update(num_fit=2048, num_eval=1024, control_combos=64, steps=(0, 10, 20, 30),
                     lambdas=(1.0,))
    cfg.sampler.update(num_steps=40, guidance=3.0)
  elif preset == "cpu":
    # Tuned on 1-seed runs (see results/cpu/images/README.md): jitter 2, batch 64, guidance 3.
    cfg.scene.jitter = 2
    cfg.split.coverage = (0.0625, 0.125, 0.25, 0.375, 0.5)
    cfg.train.update(num_steps=2500, batch_size=64, checkpoint_every=500)
    cfg.sampler.guidance = 3.0
  elif preset == "tiny":
    cfg.num_seeds = 2
    cfg.scene.update(image_size=16, grid=(1, 2), num_shapes=2, num_colours=2, jitter=2)
    cfg.split.coverage = (0.25, 0.5)
    cfg.model.update(width=64, depth=2, channels=8)
    cfg.train.update(num_steps=100, batch_size=32, chunk_size=50, log_every=10,
                     checkpoint_every=50, progress=False)
    cfg.optim.warmup_steps = 10
    cfg.sampler.num_steps = 4
    cfg.eval.update(num_prompts=8, samples_per_prompt=2, grid_prompts=2, grid_samples=3)
    cfg.probe.update(num_fit=32, num_eval=16, control_combos=2, steps=(0, 2))
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.lock()
  return cfg
