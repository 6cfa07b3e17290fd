"""Task encodings phi(z): init/apply/dim by name (see registry.py)."""

from compgen_jax.encodings.invertible import invertible_inverse
from compgen_jax.encodings.registry import REGISTRY, Encoding, default_config, get, validate

__all__ = ["REGISTRY", "Encoding", "default_config", "get", "invertible_inverse", "validate"]
