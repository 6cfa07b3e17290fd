"""compgen_jax: compositional generalization experiments in JAX."""

__version__ = "0.1.0"
