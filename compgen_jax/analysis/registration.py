"""Where the claims' rules and thresholds are registered (results/cpu/REGISTRATION.md, committed)
and when: the commit that last changed that file and its date, recorded in REGISTERED_FILE
(`experiments/claims.py --record_registration` writes it from git after that commit), set beside
when a sweep's rows were made (its index's `started`), so a report says whether its rules were
fixed before its runs. Reports read the record, not git, so they regenerate byte for byte in
any checkout (a shallow clone, an archive); tests/test_registration.py holds the record equal
to git's history wherever that history is there."""

import datetime
import json
import os
import subprocess

from compgen_jax import files
from compgen_jax.types import DataError

REGISTRATION_FILE = os.path.join("results", "cpu", "REGISTRATION.md")
REGISTERED_FILE = os.path.join("results", "cpu", "registered.json")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def from_git(repo: str = REPO) -> tuple[str, str] | None:
  """(short commit, ISO UTC date) of the last commit that changed the registration file; None
  outside a git checkout, in one without that history, or when the file was never committed."""
  try:
    out = subprocess.run(["git", "-C", repo, "log", "-1", "--format=%h %cI", "--",
                          REGISTRATION_FILE], capture_output=True, text=True, check=True,
                         timeout=30).stdout.split()
  except (OSError, subprocess.SubprocessError):
    return None
  if len(out) != 2:
    return None
  when = datetime.datetime.fromisoformat(out[1]).astimezone(datetime.UTC)
  return out[0], when.strftime("%Y-%m-%dT%H:%M:%S")


def record(repo: str = REPO) -> str:
  """Writes REGISTERED_FILE from git (from_git); DataError when git cannot say."""
  reg = from_git(repo)
  if reg is None:
    raise DataError(f"git has no commit of {REGISTRATION_FILE} in {repo!r}: commit it first")
  return files.write_json(os.path.join(repo, REGISTERED_FILE),
                          {"commit": reg[0], "date": reg[1]}, indent=1, sort_keys=True)


def registered(repo: str = REPO) -> tuple[str, str] | None:
  """(short commit, ISO UTC date) as REGISTERED_FILE records them; None when there is none."""
  path = os.path.join(repo, REGISTERED_FILE)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    rec = json.load(f)
  return rec["commit"], rec["date"]


def sentence(rows_made: str | None, repo: str = REPO) -> str:
  """What a report says about its registration: the commit and date, and whether the rows
  (made at `rows_made`, an ISO date as the sweep index records it, UTC) came before it."""
  reg = registered(repo)
  if reg is None:
    return (f"Rules: `{REGISTRATION_FILE}` (no `{REGISTERED_FILE}` here, so the registration "
            f"commit is not named).")
  commit, when = reg
  text = f"Rules and thresholds registered in `{REGISTRATION_FILE}` at commit {commit} ({when} UTC)"
  if rows_made and rows_made < when:
    return text + (f"; this sweep's rows were made from {rows_made}, before that: its verdicts "
                   f"follow rules changed after the runs (post hoc), not rules fixed before them.")
  return text + (f"; this sweep's rows were made from {rows_made}, after it." if rows_made
                 else ".")
