"""Where the claims' rules and thresholds are registered (results/cpu/REGISTRATION.md, committed)
and when: the commit that last changed that file, from git, set beside when a sweep's rows were
made (its index's `started`), so a report says whether its rules were fixed before its runs."""

import datetime
import os
import subprocess

REGISTRATION_FILE = os.path.join("results", "cpu", "REGISTRATION.md")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def registered(repo: str = REPO) -> tuple[str, str] | None:
  """(short commit, ISO UTC date) of the last commit that changed the registration file; None
  outside a git checkout or when the file was never committed."""
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


def sentence(rows_made: str | None, repo: str = REPO) -> str:
  """What a report says about its registration: the commit and date, and whether the rows
  (made at `rows_made`, an ISO date as the sweep index records it, UTC) came before it."""
  reg = registered(repo)
  if reg is None:
    return (f"Rules: `{REGISTRATION_FILE}` (no git history here, so the registration commit "
            f"is not named).")
  commit, when = reg
  text = f"Rules and thresholds registered in `{REGISTRATION_FILE}` at commit {commit} ({when} UTC)"
  if rows_made and rows_made < when:
    return text + (f"; this sweep's rows were made from {rows_made}, before that: its verdicts "
                   f"follow rules changed after the runs (post hoc), not rules fixed before them.")
  return text + (f"; this sweep's rows were made from {rows_made}, after it." if rows_made
                 else ".")
