"""Collects many workdirs into one table and correlates decodability with OOD R^2 across runs.

  python experiments/report.py --workdirs=/tmp/a,/tmp/b --out=/tmp/report
  python experiments/report.py --workdirs='/tmp/sweep/*' --out=/tmp/report --lam=1.0

Reads config.json, metrics.jsonl, eval.jsonl and probes.jsonl; writes decodability.jsonl and the
scatter PNG into --out.
"""

import glob
import os

from absl import flags

from compgen_jax import cli
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import correlation

_WORKDIRS = flags.DEFINE_list("workdirs", None, "Workdirs (glob patterns allowed).")
_OUT = flags.DEFINE_string("out", None, "Directory for the table and the scatter plot.")
_LAM = flags.DEFINE_float("lam", None, "Probe lambda to report (default: the first one).")
flags.mark_flags_as_required(["workdirs", "out"])


def _is_workdir(path: str) -> bool:
  return os.path.isfile(os.path.join(path, workdir_lib.CONFIG_FILE))


def main(argv):
  del argv
  # A glob over a sweep dir also matches its bookkeeping (index.json, logs/): keep workdirs only.
  workdirs = [p for pattern in _WORKDIRS.value
              for p in ([m for m in sorted(glob.glob(pattern)) if _is_workdir(m)] or [pattern])]
  with cli.user_errors():
    print(correlation.write_report(workdirs, _OUT.value, _LAM.value))


if __name__ == "__main__":
  cli.run(main)
