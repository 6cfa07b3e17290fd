"""Does a rerun give the committed numbers? Its run files and verdicts against the committed ones.

  python experiments/rerun_diff.py --rerun=/tmp/clone/results/cpu          # vs results/cpu
  python experiments/rerun_diff.py --rerun=/tmp/clone/results/cpu --experiments=model_size \
      --out=/tmp/rerun_diff.md
  python experiments/rerun_diff.py --rerun=results/cpu/reruns/F \
      --out=results/cpu/reruns/F/rerun_diff.md     # a committed rerun (results/cpu/reruns/)

Compares every experiment folder the rerun dir has (e.g. a clone's results/cpu after `make -k
reproduce-cpu` with its sweep folders emptied; compgen_jax/analysis/rerun.py says what is
compared) and prints a table: files byte for byte, the largest difference of any number and of
any R^2 / accuracy, verdicts the same, the report the same above its runs section; then each
changed verdict and unpaired file. Exit status 1 if a verdict changed or a committed file has no
partner in the rerun. A folder the clone kept as committed compares with itself: name the
rerun experiments with --experiments. A rerun committed under results/cpu/reruns/<machine>/
(its sweeps' small files and reports) keeps its comparison beside it (rerun.DIFF_FILE, kept
current by tests/test_committed_reports.py), and the claims table marks each verdict it flips
as fragile (experiments/claims.py).
"""

import sys

from absl import flags

from compgen_jax import cli, files
from compgen_jax.analysis import rerun

_COMMITTED = flags.DEFINE_string("committed", "results/cpu", "The committed results dir.")
_RERUN = flags.DEFINE_string("rerun", None, "The rerun's results dir.", required=True)
_EXPERIMENTS = flags.DEFINE_list("experiments", None, "Experiment folders to compare (default: "
                                 "every one the rerun dir has).")
_OUT = flags.DEFINE_string("out", None, "Also write the markdown here.")


def main(argv):
  del argv
  text, ok = rerun.render(rerun.compare(_COMMITTED.value, _RERUN.value, _EXPERIMENTS.value))
  print(text, end="")
  if _OUT.value:
    files.write_text(_OUT.value, text)
  if not ok:
    sys.exit(1)


if __name__ == "__main__":
  cli.run(main)
