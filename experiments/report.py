"""Reports on runs: a sweep's REPORT.md with figures, or decodability vs OOD R^2 across workdirs.

  python experiments/report.py --sweep_dir=results/cpu/data_scaling        # DIR/REPORT.md
  python experiments/report.py --sweep_dir=/x/model_size --out=/tmp/report
  python experiments/report.py --workdirs=/tmp/a,/tmp/b --out=/tmp/report
  python experiments/report.py --workdirs='/tmp/sweep/*' --out=/tmp/report --lam=1.0

--sweep_dir reads DIR/index.json (written by experiments/sweep.py), picks the sections from the
sweep config's name (configs/sweeps/<experiment>.py) and writes REPORT.md and its PNGs into
--out (default DIR); a sweep of another binary (configs/sweeps/images.py) gets that binary's
report (report.md). --workdirs reads config.json, metrics.jsonl, eval.jsonl and probes.jsonl and
writes decodability.jsonl and the scatter PNG into --out.
"""

import glob
import os

from absl import flags

from compgen_jax import cli
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import correlation
from compgen_jax.sweeps import spec
from compgen_jax.types import ConfigError

_SWEEP_DIR = flags.DEFINE_string("sweep_dir", None, "A sweep dir (with index.json): write its "
                                 "REPORT.md and figures.")
_WORKDIRS = flags.DEFINE_list("workdirs", None, "Workdirs (glob patterns allowed): correlate "
                              "decodability with OOD R^2 across their runs.")
_OUT = flags.DEFINE_string("out", None, "Output directory (default for --sweep_dir: the sweep "
                           "dir; required with --workdirs).")
_LAM = flags.DEFINE_float("lam", None, "Probe lambda to report (default: the first one).")


def _is_workdir(path: str) -> bool:
  return os.path.isfile(os.path.join(path, workdir_lib.CONFIG_FILE))


def main(argv):
  del argv
  if (_SWEEP_DIR.value is None) == (_WORKDIRS.value is None):
    raise ConfigError("sweep_dir", "give exactly one of --sweep_dir and --workdirs")
  if _SWEEP_DIR.value is not None:
    binary = workdir_lib.read_index(_SWEEP_DIR.value).get("binary", "train")
    if binary not in spec.BINARIES:
      raise ConfigError("sweep_dir", f"{_SWEEP_DIR.value!r}: its index names the binary "
                        f"{binary!r}; known: {', '.join(spec.BINARIES)}")
    print(spec.BINARIES[binary].report(_SWEEP_DIR.value, _OUT.value))
    return
  if _OUT.value is None:
    raise ConfigError("out", "--workdirs needs --out")
  # A glob over a sweep dir also matches its bookkeeping (index.json, logs/): keep workdirs.
  workdirs = [p for pattern in _WORKDIRS.value
              for p in ([m for m in sorted(glob.glob(pattern)) if _is_workdir(m)] or [pattern])]
  print(correlation.write_report(workdirs, _OUT.value, _LAM.value))


if __name__ == "__main__":
  cli.run(main)
