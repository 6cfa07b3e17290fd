"""Where the claims' rules and thresholds are registered (results/cpu/REGISTRATION.md, committed)
and when: every commit that changed that file and its date, and the commit that registered each
rule (RULES), recorded in REGISTERED_FILE (`experiments/claims.py --record_registration` writes
it from git after that commit), set beside when a sweep's rows were made (its index's
`started`; ROWS for the applications without one), so a report, and each claims row (`status`),
says whether its rules were fixed before its runs. Rows made between two registrations name the
last one before them and say that the file changed after them. Reports read the record, not
git, so they regenerate byte for byte in any checkout (a shallow clone, an archive);
tests/test_registration.py holds the record equal to git's history wherever that history is
there."""

import datetime
import json
import os
import subprocess

from compgen_jax import files
from compgen_jax.types import DataError

REGISTRATION_FILE = os.path.join("results", "cpu", "REGISTRATION.md")
REGISTERED_FILE = os.path.join("results", "cpu", "registered.json")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Each rule a claims row is judged by -> the text that registers it in REGISTRATION_FILE: its
# registering commit is the first that added that text (`git log -S`), recorded by `record`.
RULES = {
    "rises_tasks": "| OOD rises monotonically with the number of training tasks |",
    "near_one": "| OOD approaches 1 |",
    "rises_scale": "| OOD rises with width / depth |",
    "decodability": "| task decodability correlates strongly with OOD |",
    "layers": "| failing identity-encoded runs lose the constituents in deeper layers |",
    "encoding_table": "| the encoding table |",
    "scaling_law": "| tasks needed grow sub-exponentially |",
    "support": "| support strategies hurt / do not hurt |",
    "transformer": "| the transformer is more data-efficient |",
    "theorem": "| Theorem 3.1 |",
    "decodability_fit": "**fit held fixed** when the runs are of one architecture",
    "scaling_law_k": "**against the paper** (tasks needed grow sub-exponentially in T across K)",
    "letters_exact": "| letters: two experts composed",
    "letters_length": "| letters: exact match at every length",
    "letters_k": "| letters: more than two experts",
    "images_rises": "| images: held-out success rises",
    "images_decodability": "| images: decodability",
    # issue 57, after every committed run
    "trend": "- **trend** (issue 57)",
    "reaches": "- **reaches** (issue 57)",
    "robust": "- **robust to one design point** (issue 57)",
    "layers_did": "- **layers, a difference in differences** (issue 57)",
    "margin": "- **equivalence margin** (issue 57)",
    "letters_k_own": "- **letters, k experts at the authors' own setting** (issue 57)",
}
# Applications whose rows carry no start date (a sweep's index.json does): when their rows were
# made, taken as the first commit of these paths, so rows committed later are never called
# registered before their rules (a rerun committed after a registration reads post hoc).
ROWS = {"theorem": os.path.join("results", "cpu", "theorem", "theorem.jsonl"),
        "letters": os.path.join("results", "cpu", "letters", "runs")}
BEFORE, POST_HOC = "registered before its runs", "post hoc"


def history(repo: str = REPO, path: str = REGISTRATION_FILE, *args: str
            ) -> list[tuple[str, str]]:
  """[(short commit, ISO UTC date)] of every commit that changed `path` (the registration file;
  `args`: more git log options, e.g. -S<text>), oldest first; [] outside a git checkout, in one
  without that history, or when it was never committed."""
  try:
    out = subprocess.run(["git", "-C", repo, "log", "--format=%h %cI", *args, "--", path],
                         capture_output=True, text=True, check=True, timeout=30).stdout.split("\n")
  except (OSError, subprocess.SubprocessError):
    return []
  commits = []
  for line in reversed([line for line in out if line.strip()]):
    commit, date = line.split()
    when = datetime.datetime.fromisoformat(date).astimezone(datetime.UTC)
    commits.append((commit, when.strftime("%Y-%m-%dT%H:%M:%S")))
  return commits


def from_history(repo: str = REPO) -> dict:
  """The record `record` writes, from git: the registration file's commits, each rule's
  registering commit (the first to add its RULES text) and each ROWS path's first commit."""
  commits = history(repo)
  rules = {}
  for rule, text in RULES.items():
    found = history(repo, REGISTRATION_FILE, f"-S{text}")
    if found:
      rules[rule] = {"commit": found[0][0], "date": found[0][1]}
  rows = {name: dates[0][1] for name, path in ROWS.items() if (dates := history(repo, path))}
  return {"commit": commits[-1][0], "date": commits[-1][1],
          "history": [{"commit": c, "date": d} for c, d in commits], "rules": rules,
          "rows": rows} if commits else {}


def from_git(repo: str = REPO) -> tuple[str, str] | None:
  """(short commit, ISO UTC date) of the last commit that changed the registration file (None
  where `history` is empty)."""
  commits = history(repo)
  return commits[-1] if commits else None


def record(repo: str = REPO) -> str:
  """Writes REGISTERED_FILE from git (`from_history`): the last commit and date, every earlier
  one, each rule's and each ROWS path's; DataError when git cannot say."""
  found = from_history(repo)
  if not found:
    raise DataError(f"git has no commit of {REGISTRATION_FILE} in {repo!r}: commit it first")
  return files.write_json(os.path.join(repo, REGISTERED_FILE), found, indent=1, sort_keys=True)


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


def rows_made(name: str, repo: str = REPO) -> str | None:
  """When the rows of a ROWS application were made, as recorded (None: not recorded)."""
  return ((_read(repo) or {}).get("rows") or {}).get(name)


def status(rules: list[str], made: str | None, repo: str = REPO) -> dict:
  """{rule_commit, registration} of a claims row judged by `rules` from rows made at `made`
  (ISO UTC): the commit that registered the latest of its rules, and BEFORE when the rows came
  after it, else POST_HOC (also when it is not known when they were made)."""
  recorded = (_read(repo) or {}).get("rules", {})
  unknown = [r for r in rules if r not in recorded]
  if unknown or not rules:
    raise DataError(f"rule(s) {unknown or rules} of a claims row have no registering commit in "
                    f"{REGISTERED_FILE}: commit {REGISTRATION_FILE} with their text "
                    f"(registration.RULES), then run experiments/claims.py --record_registration")
  latest = max((recorded[r] for r in rules), key=lambda r: r["date"])
  return {"rule_commit": latest["commit"],
          "registration": BEFORE if made and made > latest["date"] else POST_HOC}


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
