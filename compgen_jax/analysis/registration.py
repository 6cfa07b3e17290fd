"""Where the claims' rules and thresholds are registered (results/cpu/REGISTRATION.md, committed)
and when: every commit that changed that file and its date, recorded in REGISTERED_FILE
(`experiments/claims.py --record_registration` writes it from git after that commit), set beside
when a sweep's rows were made (its index's `started`), so a report says whether its rules were
fixed before its runs. Rows made between two registrations name the last one before them and
say that the file changed after them. Reports read the record, not git, so they regenerate byte
for byte in any checkout (a shallow clone, an archive); tests/test_registration.py holds the
record equal to git's history wherever that history is there."""

import datetime
import json
import os
import subprocess

from compgen_jax import files
from compgen_jax.types import DataError

REGISTRATION_FILE = os.path.join("results", "cpu", "REGISTRATION.md")
REGISTERED_FILE = os.path.join("results", "cpu", "registered.json")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def history(repo: str = REPO) -> list[tuple[str, str]]:
  """[(short commit, ISO UTC date)] of every commit that changed the registration file, oldest
  first; [] outside a git checkout, in one without that history, or when it was never
  committed."""
  try:
    out = subprocess.run(["git", "-C", repo, "log", "--format=%h %cI", "--",
                          REGISTRATION_FILE], capture_output=True, text=True, check=True,
                         timeout=30).stdout.split("\n")
  except (OSError, subprocess.SubprocessError):
    return []
  commits = []
  for line in reversed([line for line in out if line.strip()]):
    commit, date = line.split()
    when = datetime.datetime.fromisoformat(date).astimezone(datetime.UTC)
    commits.append((commit, when.strftime("%Y-%m-%dT%H:%M:%S")))
  return commits


def from_git(repo: str = REPO) -> tuple[str, str] | None:
  """(short commit, ISO UTC date) of the last commit that changed the registration file (None
  where `history` is empty)."""
  commits = history(repo)
  return commits[-1] if commits else None


def record(repo: str = REPO) -> str:
  """Writes REGISTERED_FILE from git: the last commit and date, and every earlier one
  (`history`); DataError when git cannot say."""
  commits = history(repo)
  if not commits:
    raise DataError(f"git has no commit of {REGISTRATION_FILE} in {repo!r}: commit it first")
  return files.write_json(os.path.join(repo, REGISTERED_FILE),
                          {"commit": commits[-1][0], "date": commits[-1][1],
                           "history": [{"commit": c, "date": d} for c, d in commits]},
                          indent=1, sort_keys=True)


def registered(repo: str = REPO) -> tuple[str, str] | None:
  """(short commit, ISO UTC date) as REGISTERED_FILE records them; None when there is none."""
  rec = _read(repo)
  return (rec["commit"], rec["date"]) if rec else None


def recorded_history(repo: str = REPO) -> list[tuple[str, str]]:
  """[(short commit, ISO UTC date)] of every registration REGISTERED_FILE records, oldest first
  (a record without its history: the last one alone)."""
  rec = _read(repo)
  if not rec:
    return []
  return [(h["commit"], h["date"]) for h in rec.get("history", [])] or [(rec["commit"],
                                                                        rec["date"])]


def _read(repo: str) -> dict | None:
  path = os.path.join(repo, REGISTERED_FILE)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def sentence(rows_made: str | None, repo: str = REPO) -> str:
  """What a report says about its registration: the commit and date, and whether the rows
  (made at `rows_made`, an ISO date as the sweep index records it, UTC) came before it; rows
  made between two registrations name the last one before them and the later change."""
  reg = registered(repo)
  if reg is None:
    return (f"Rules: `{REGISTRATION_FILE}` (no `{REGISTERED_FILE}` here, so the registration "
            f"commit is not named).")
  commit, when = reg
  text = f"Rules and thresholds registered in `{REGISTRATION_FILE}` at commit {commit} ({when} UTC)"
  earlier = [(c, d) for c, d in recorded_history(repo) if d <= (rows_made or "")]
  if rows_made and rows_made < when and not earlier:
    return text + (f"; this sweep's rows were made from {rows_made}, before that: its verdicts "
                   f"follow rules changed after the runs (post hoc), not rules fixed before them.")
  if rows_made and rows_made < when:
    return text + (f"; this sweep's rows were made from {rows_made}, after the registration at "
                   f"commit {earlier[-1][0]} ({earlier[-1][1]} UTC) and before the file's later "
                   f"change(s): its verdicts are post hoc only if those changed its rules "
                   f"(`git log -p -- {REGISTRATION_FILE}` shows what each change did).")
  return text + (f"; this sweep's rows were made from {rows_made}, after it." if rows_made
                 else ".")
