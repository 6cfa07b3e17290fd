"""The claims table of a results dir: every <experiment>/claims.json into one list and a table.

  python experiments/claims.py --results_dir=results/cpu     # after experiments/report.py
  python experiments/claims.py --record_registration   # after committing REGISTRATION.md

Writes RESULTS/claims.json and the table between the `<!-- claims:begin -->` and
`<!-- claims:end -->` markers of RESULTS/README.md (placed after its first paragraph if
missing). A malformed claims.json is refused, naming the file and field, before anything is
written. --record_registration writes results/cpu/registered.json (the commit that last
changed results/cpu/REGISTRATION.md, from git), which every report names; commit it with the
reports regenerated after it.
"""

from absl import flags

from compgen_jax import cli
from compgen_jax.analysis import claims, registration

_RESULTS_DIR = flags.DEFINE_string("results_dir", "results/cpu", "A results dir holding one "
                                   "sweep dir (with its report's claims.json) per experiment.")
_RECORD = flags.DEFINE_bool("record_registration", False, "Write the registration record "
                            "(the commit of results/cpu/REGISTRATION.md, from git) and exit.")


def main(argv):
  del argv
  if _RECORD.value:
    print(registration.record())
    return
  print("\n".join(claims.write(_RESULTS_DIR.value)))


if __name__ == "__main__":
  cli.run(main)
