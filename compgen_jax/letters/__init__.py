"""The letter-substitution experiments of logit composition (paper 2): data, training, the
registry of experiments (registry.py) and the runner."""
