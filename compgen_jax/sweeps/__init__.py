"""Sweeps over shape-changing settings: one experiments/train.py program per setting.

spec.py expands and validates a sweep config, program.py runs one program (train, then optional
probe / evaluate), index.py records what ran, launch.py runs programs locally, slurm.py through
submitit. Array-valued axes (seeds, sweep.frac_ood, ...) stay vmapped inside each program.
"""
