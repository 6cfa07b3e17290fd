"""The claims record (CLAIM_KEYS: `claim` makes one, `claims_json` writes a list byte-stable) and
the claims of every report under a results dir, as one JSON list and one README table.

  python experiments/claims.py --results_dir=results/cpu

Reads RESULTS/<experiment>/claims.json (written by each report, a list of CLAIM_KEYS records),
validates every record before writing anything, then writes RESULTS/claims.json (sorted by
experiment, each file's own order kept; `figure` relative to RESULTS) and the table between the
README's claims markers (RESULTS/README.md; the markers go after its first heading and paragraph
when missing; the rest of the README is left alone).

A sweep rerun from scratch on another machine is committed as RESULTS/reruns/<machine>/
<experiment>/ (its small files and report, as a sweep dir); a claim whose verdict that rerun's
claims.json gives otherwise is marked fragile in the table and counted in its summary.
"""

import glob
import json
import os

from compgen_jax import files
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import markdown as md
from compgen_jax.analysis import readings, registration, verdicts
from compgen_jax.types import ConfigError

CLAIMS_FILE = workdir_lib.CLAIMS_FILE  # RESULTS/<experiment>/claims.json, and the gathered one
README_FILE = "README.md"
RERUNS_DIR = "reruns"  # RESULTS/reruns/<machine>/<experiment>/: a sweep rerun elsewhere
BEGIN, END = "<!-- claims:begin -->", "<!-- claims:end -->"
VERDICTS = verdicts.VERDICTS
# composition: OOD against ID (the gap); against_paper: does our interval reach the paper's value;
# rules: the registration.RULES judging the row; rule_commit, registration: registration.status
CLAIM_KEYS = ("experiment", "claim", "paper", "ours", "seeds", "verdict", "figure", "note",
              "composition", "against_paper", "rules", "rule_commit", "registration")
HEADER = ["claim", "paper", "ours (mean ± s.d., seeds)", "verdict",
          "composition (OOD against ID)", "against the paper's value", "rule registered",
          "figure"]
REGISTRATIONS = (registration.BEFORE, registration.POST_HOC)
# field -> (check, what it must be); figure may also be null
_TEXT = (lambda v: isinstance(v, str), "a string")
FIELDS = {"experiment": _TEXT, "claim": _TEXT, "paper": _TEXT, "ours": _TEXT, "note": _TEXT,
          "composition": _TEXT, "against_paper": _TEXT,
          "seeds": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
                    "an integer >= 0"),
          "verdict": (lambda v: v in VERDICTS, "one of " + ", ".join(map(repr, VERDICTS))),
          "rules": (lambda v: isinstance(v, list) and v and all(r in registration.RULES
                                                                 for r in v),
                    "a list of registration.RULES names"),
          "rule_commit": _TEXT,
          "registration": (lambda v: v in REGISTRATIONS, " or ".join(map(repr, REGISTRATIONS))),
          "figure": (lambda v: v is None or (isinstance(v, str) and v), "a path or null")}
assert set(FIELDS) == set(CLAIM_KEYS)  # the validator checks exactly the record's fields


def claim(claim_text: str, paper: str, ours: str, seeds: int, verdict: str,
          figure: str | None = None, note: str = "", *, composition: str,
          against_paper: str, rules: tuple[str, ...]) -> dict:
  """One claims.json record with its two readings: `composition` (OOD against ID: is it
  composition or fit) and `against_paper` (does our interval reach the paper's value; if not,
  why: fit, scale or a real difference), and the registration.RULES it is judged by. The
  report fills in the experiment and, by `registered`, the registration."""
  assert verdict in VERDICTS, verdict
  assert rules and all(r in registration.RULES for r in rules), rules
  return {"experiment": "", "claim": claim_text, "paper": paper, "ours": ours,
          "seeds": int(seeds), "verdict": verdict, "figure": figure, "note": note,
          "composition": composition, "against_paper": against_paper, "rules": list(rules),
          "rule_commit": "", "registration": ""}


def registered(record: dict, experiment: str, rows_made: str | None) -> dict:
  """The record of `experiment`'s report, whose rows were made from `rows_made` (ISO UTC), with
  its rule's registering commit and whether it came before those rows (registration.status)."""
  return {**record, "experiment": experiment,
          **registration.status(record["rules"], rows_made)}


def claims_json(records: list[dict]) -> str:
  """claims.json's text, a report's or the gathered table's: sorted keys, byte-stable."""
  return json.dumps(records, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def read_claims(path: str) -> list[dict]:
  """The records of one claims.json; a ConfigError naming the file, record and field if it is
  not a list of records with exactly CLAIM_KEYS, each of its type."""
  try:
    with open(path) as f:
      records = json.load(f)
  except json.JSONDecodeError as e:
    raise ConfigError("claims", f"{path!r} is not valid JSON ({e})") from None
  if not isinstance(records, list):
    raise ConfigError("claims", f"{path!r} holds a JSON {type(records).__name__}, not a list "
                      f"of claims")
  for i, record in enumerate(records):
    if not isinstance(record, dict):
      raise ConfigError("claims", f"{path!r}[{i}] is not an object")
    unknown = sorted(set(record) - set(FIELDS))
    if unknown:
      raise ConfigError(f"claims.{unknown[0]}", f"{path!r}[{i}]: unknown field; a claim has "
                        f"{', '.join(CLAIM_KEYS)}")
    for field, (ok, must) in FIELDS.items():
      if field not in record:
        raise ConfigError(f"claims.{field}", f"{path!r}[{i}]: missing")
      if not ok(record[field]):
        raise ConfigError(f"claims.{field}", f"{path!r}[{i}]: {record[field]!r} is not {must}")
    figure = record["figure"]
    if figure is not None and not os.path.isfile(os.path.join(os.path.dirname(path), figure)):
      raise ConfigError("claims.figure", f"{path!r}[{i}]: no figure {figure!r} beside it")
  return records


def collect(results_dir: str) -> list[dict]:
  """Every RESULTS/*/claims.json's records, sorted by experiment (stable: each file's order),
  figures made relative to RESULTS."""
  if not os.path.isdir(results_dir):
    raise ConfigError("results_dir", f"{results_dir!r} is not a directory")
  out = []
  for path in sorted(glob.glob(os.path.join(results_dir, "*", CLAIMS_FILE))):
    sweep = os.path.basename(os.path.dirname(path))
    out += [{**r, "figure": r["figure"] and f"{sweep}/{r['figure']}"} for r in read_claims(path)]
  return sorted(out, key=lambda r: r["experiment"])


def paired(ours: list[dict], theirs: list[dict]) -> list[tuple[dict, dict]]:
  """Each claim of ours with the record of the same claim text in theirs (claims theirs lacks
  are left out)."""
  by_claim = {r["claim"]: r for r in theirs}
  return [(r, by_claim[r["claim"]]) for r in ours if r["claim"] in by_claim]


def fragile(results_dir: str, claims: list[dict]) -> dict[tuple[str, str], list[str]]:
  """{(experiment, claim): ['<machine>: <its verdict>', ...]} for each claim whose verdict a
  rerun under RESULTS/reruns/<machine>/<experiment>/ gives otherwise; a ConfigError if a rerun's
  experiment has no claims here (checked, like its claims.json, before anything is written)."""
  out: dict = {}
  for path in sorted(glob.glob(os.path.join(results_dir, RERUNS_DIR, "*", "*", CLAIMS_FILE))):
    experiment_dir = os.path.dirname(path)
    machine, experiment = os.path.basename(os.path.dirname(experiment_dir)), \
        os.path.basename(experiment_dir)
    ours = [c for c in claims if c["experiment"] == experiment]
    if not ours:
      raise ConfigError("reruns", f"{path!r}: a rerun of {experiment!r}, which has no claims in "
                        f"{results_dir!r}")
    for mine, theirs in paired(ours, read_claims(path)):
      if mine["verdict"] != theirs["verdict"]:
        out.setdefault((experiment, mine["claim"]), []).append(f"{machine}: {theirs['verdict']}")
  return out


def table(claims: list[dict], flips: dict | None = None) -> str:
  """The claims as a markdown table (links relative to RESULTS)."""
  if not claims:
    return (f"No claims yet: no `<experiment>/{CLAIMS_FILE}` (each sweep's report writes "
            f"one).")
  flips = flips or {}
  cell = md.text_cell
  rows = [[f"{cell(c['claim'])} ({c['experiment']})", cell(c["paper"]), cell(c["ours"]),
           f"**{c['verdict']}**" + _fragile_note(flips.get((c["experiment"], c["claim"]))),
           cell(c["composition"]), cell(c["against_paper"]),
           f"{c['registration']} ({c['rule_commit']})",
           f"[{os.path.basename(c['figure'])}]({c['figure']})" if c["figure"] else "-"]
          for c in claims]
  return summary(claims, flips) + "\n\n" + md.table(HEADER, rows)


def _fragile_note(flipped: list[str] | None) -> str:
  """' (fragile: flips on a rerun, machine F: not shown)' for a flipped verdict, else ''."""
  return "" if not flipped else (f" (fragile: flips on a rerun, machine "
                                 f"{'; machine '.join(flipped)})")


def summary(claims: list[dict], flips: dict | None = None) -> str:
  """The paragraph above the table, counted from the verdicts and the paper readings: what is
  reproduced, what only as a trend at CPU scale, what is not testable here, what is contradicted
  (readings.CONTRADICTS, named in full) and what is not reproduced (counts per experiment);
  then the fragile verdicts (`fragile`'s flips), named in full."""
  untestable = [c for c in claims if c["verdict"] == verdicts.NOT_TESTABLE
                or readings.NOT_TESTABLE_YET in c["against_paper"]]
  rest = [c for c in claims if c not in untestable]
  contradicted = [c for c in rest if readings.CONTRADICTS in c["against_paper"]]
  rest = [c for c in rest if c not in contradicted]
  reproduced = [c for c in rest if c["verdict"] == verdicts.SHOWN
                and any(p in c["against_paper"] for p in readings.AGREEMENT)]
  trend = [c for c in rest if c not in reproduced
           and c["verdict"] in (verdicts.SHOWN, verdicts.PARTIAL)]
  other = [c for c in rest if c not in reproduced and c not in trend]
  flips = flips or {}
  flipped = [c for c in claims if (c["experiment"], c["claim"]) in flips]
  reg = registration.registered()
  return "\n".join([
      f"**In short** ({len(claims)} claims rows, counted from the verdicts and readings below; "
      f"rules registered in `{registration.REGISTRATION_FILE}`"
      + (f", last changed at commit {reg[0]} ({reg[1]} UTC); each row names the commit that "
         f"registered the latest of its rules and says whether that came before its runs "
         f"(*{registration.BEFORE}*) or after them (*{registration.POST_HOC}*), and every "
         f"count below is split by it" if reg else "") + "):",
      f"- **reproduced** (shown, and the interval reaches the paper's value or direction): "
      f"{_per_experiment(reproduced)}.",
      f"- **only as a trend at CPU scale** (shown in part, or short of the paper's value): "
      f"{_per_experiment(trend)}.",
      f"- **not testable here (yet)** against the paper's claim (the verdict may still read "
      f"the composition; the reason is in the row): {_per_experiment(untestable)}.",
      f"- **contradicted** by these runs: {_per_experiment(contradicted)}"
      + "".join(f"; {c['claim']} ({c['experiment']}, {c['registration']}: {c['ours']})"
                for c in contradicted) + ".",
      f"- **not reproduced** (not shown or not judged, without contradicting): "
      f"{_per_experiment(other)}.",
      f"- **fragile** (the verdict flips on a rerun from scratch on another machine, "
      f"`{RERUNS_DIR}/`; counted above as committed): {_per_experiment(flipped)}"
      + "".join(f"; {c['claim']} ({c['experiment']}: {c['verdict']}, "
                f"{', '.join(flips[c['experiment'], c['claim']])})" for c in flipped) + "."])


def _per_experiment(claims: list[dict]) -> str:
  """'5 (registered before its runs 1, post hoc 4; data_scaling 2, task_support 3)'."""
  counts: dict = {}
  for c in claims:
    counts[c["experiment"]] = counts.get(c["experiment"], 0) + 1
  split = ", ".join(f"{r} {sum(c['registration'] == r for c in claims)}" for r in REGISTRATIONS)
  return f"{len(claims)}" + (f" ({split}; " + ", ".join(f"{e} {n}" for e, n in counts.items())
                              + ")" if counts else "")


def with_table(readme: str, block: str) -> str:
  """The README text with `block` between the claims markers; the markers are put after the
  first heading and its first paragraph (and the code block it leads into) when missing.
  Nothing else changes."""
  if (BEGIN in readme) != (END in readme) or readme.find(END) < readme.find(BEGIN):
    raise ConfigError("readme", f"the README has one claims marker without the other in order "
                      f"({BEGIN} ... {END})")
  fenced = f"{BEGIN}\n{block}\n{END}"
  if BEGIN in readme:
    head, rest = readme.split(BEGIN, 1)
    return head + fenced + rest.split(END, 1)[1]
  lines = readme.split("\n")
  at = next((i + 1 for i, line in enumerate(lines) if line.startswith("# ")), 0)
  while at < len(lines) and not lines[at].strip():  # blank lines, then the paragraph
    at += 1
  while at < len(lines) and lines[at].strip():
    at += 1
  fence = next((i for i in range(at, len(lines)) if lines[i].strip()), len(lines))
  if fence < len(lines) and lines[fence].startswith("```"):  # "... written by" + its commands
    close = next((i for i in range(fence + 1, len(lines)) if lines[i].startswith("```")), None)
    at = at if close is None else close + 1
  return "\n".join(lines[:at] + ["", fenced] + lines[at:])


def render(results_dir: str) -> tuple[str, str]:
  """(RESULTS/claims.json, RESULTS/README.md) as `write` makes them; reads and checks only."""
  claims = collect(results_dir)
  readme = "# Results\n"
  if os.path.exists(os.path.join(results_dir, README_FILE)):
    with open(os.path.join(results_dir, README_FILE)) as f:
      readme = f.read()
  return (claims_json(claims),
          with_table(readme, table(claims, fragile(results_dir, claims))))


def write(results_dir: str) -> tuple[str, str]:
  """Writes RESULTS/claims.json and the README's claims table (everything is read and checked
  first); returns their paths."""
  claims_text, readme = render(results_dir)
  paths = os.path.join(results_dir, CLAIMS_FILE), os.path.join(results_dir, README_FILE)
  for path, text in zip(paths, (claims_text, readme), strict=True):
    files.write_text(path, text)
  return paths
