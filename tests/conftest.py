"""Test settings shared by every module: strict rank promotion, CPU, fast compiles.

The tests' models are tiny, so XLA's backend optimisation costs far more time (compiling) than it
saves (running); the persistent compilation cache lets pytest workers and the binaries the smoke
tests launch reuse each other's programs. Both are set in the environment so subprocesses inherit
them.
"""

import os
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_backend_optimization_level=0").strip()
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR",
                      os.path.join(tempfile.gettempdir(), "compgen_jax_test_jit_cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")

import jax  # noqa: E402

jax.config.update("jax_numpy_rank_promotion", "raise")
