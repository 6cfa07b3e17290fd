"""What every absl binary shares: user errors become one line and exit status 2."""

import contextlib
import sys

from absl import flags, logging

from compgen_jax.types import CheckpointError, ConfigError, NonFiniteError

USER_ERRORS = (ConfigError, CheckpointError, NonFiniteError)


@contextlib.contextmanager
def user_errors():
  """Bad config, bad checkpoint, non-finite run: `error: ...` on stderr and exit status 2."""
  try:
    yield
  except USER_ERRORS as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)


def quiet_logging() -> None:
  """WARNING unless --verbosity was given: orbax logs every save at INFO."""
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)
