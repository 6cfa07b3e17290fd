"""Reports on runs: any application's report of a directory, a sweep's REPORT.md with figures,
or decodability vs OOD R^2 across workdirs.

  python experiments/report.py --dir=results/cpu/theorem                   # DIR/report.md
  python experiments/report.py --dir=results/cpu/letters
  python experiments/report.py --dir=results/cpu/images                    # an images sweep
  python experiments/report.py --sweep_dir=results/cpu/data_scaling        # DIR/REPORT.md
  python experiments/report.py --sweep_dir=/x/model_size --out=/tmp/report
  python experiments/report.py --workdirs=/tmp/a,/tmp/b --out=/tmp/report
  python experiments/report.py --workdirs='/tmp/sweep/*' --out=/tmp/report --lam=1.0

--dir takes a sweep dir (as --sweep_dir), a workdir (its config.json names the application, apps.py)
or a folder of one application's runs (letters: DIR/runs/<name>/), and writes that application's
report into --out (default DIR). --sweep_dir reads DIR/index.json (written by experiments/sweep.py),
picks the sections from the sweep config's name (configs/sweeps/<experiment>.py) and writes
REPORT.md and its PNGs into --out (default DIR); a sweep of another application's programs
(configs/sweeps/images.py: its index names the app) gets that application's report (report.md).
--workdirs reads config.json, metrics.jsonl, eval.jsonl and probes.jsonl and writes
decodability.jsonl and the scatter PNG into --out.
"""

import glob
import os

from absl import flags

from compgen_jax import apps, cli
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import correlation
from compgen_jax.types import ConfigError

_DIR = flags.DEFINE_string("dir", None, "A sweep dir, a workdir or a folder of runs: write its "
                           "application's report.")
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
  given = [v for v in (_DIR.value, _SWEEP_DIR.value, _WORKDIRS.value) if v is not None]
  if len(given) != 1:
    raise ConfigError("dir", "give exactly one of --dir, --sweep_dir and --workdirs")
  if _DIR.value is not None:
    print(apps.of_report_dir(_DIR.value).report(_DIR.value, _OUT.value))
    return
  if _SWEEP_DIR.value is not None:
    print(apps.of_sweep_dir(_SWEEP_DIR.value).report(_SWEEP_DIR.value, _OUT.value))
    return
  if _OUT.value is None:
    raise ConfigError("out", "--workdirs needs --out")
  # A glob over a sweep dir also matches its bookkeeping (index.json, logs/): keep workdirs.
  workdirs = [p for pattern in _WORKDIRS.value
              for p in ([m for m in sorted(glob.glob(pattern)) if _is_workdir(m)] or [pattern])]
  print(correlation.write_report(workdirs, _OUT.value, _LAM.value))


if __name__ == "__main__":
  cli.run(main)
