"""The training engine, family-free: a family gives one run's `init_one` and `step` (loop.Family);
the engine lifts them over the runs (chunk.py: vmap, or one after another on a CPU), scans,
jits with donation, pads and shards (sharding.py), restores, writes rows and checkpoints
(loop.py). Also the optimiser and schedule (optim.py), the `train` section (config.py),
checkpoint passes (passes.py) and the ridge solver (ridge.py)."""
