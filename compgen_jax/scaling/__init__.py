"""Paper 1's experiment ("Scaling leads to compositional generalization"): hyperteacher and
preference runs (state.py, runs.py, batches.py, step.py, train.py), its config (config.py),
evaluators, activations, probes and the standalone passes over checkpoints (passes.py)."""
