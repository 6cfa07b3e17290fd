"""The registration file (results/cpu/REGISTRATION.md): its thresholds table equals the code's
constants; the committed record names the commit that last changed it; and a report says whether
its rows were made before that commit (checked on a throwaway git repository with planted commit
dates, then without its .git)."""

import importlib
import json
import os
import re
import shutil
import subprocess

import pytest

from compgen_jax.analysis import registration
from compgen_jax.types import DataError
from tests.helpers import REPO


def _thresholds() -> list[tuple[str, str, str]]:
  with open(os.path.join(REPO, registration.REGISTRATION_FILE)) as f:
    text = f.read().split("## Thresholds", 1)[1].split("\n## ", 1)[0]
  return re.findall(r"^\| ([A-Z_]+) \| ([0-9.]+) \| `analysis/(\w+)\.py` \|", text, re.M)


def test_every_registered_threshold_is_the_codes():
  rows = _thresholds()
  assert len(rows) >= 10
  for name, value, module in rows:
    got = getattr(importlib.import_module(f"compgen_jax.analysis.{module}"), name)
    assert float(got) == float(value), (name, got, value)


def _git(repo, *args, date=None):
  env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
         "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
  if date:
    env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
  return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True,
                        env=env).stdout


@pytest.fixture
def git_repo(tmp_path) -> str:
  """An empty git repository at tmp_path (skips without git)."""
  try:
    _git(str(tmp_path), "init", "-q")
  except (OSError, subprocess.CalledProcessError):
    pytest.skip("no git")
  return str(tmp_path)


def test_rows_made_before_the_registration_are_called_post_hoc(git_repo, tmp_path):
  repo = git_repo
  assert registration.from_git(repo) is None  # nothing committed yet
  with pytest.raises(DataError, match="commit it first"):
    registration.record(repo)
  assert registration.registered(repo) is None
  assert "not named" in registration.sentence("2026-12-02T06:32:43", repo)
  path = tmp_path / registration.REGISTRATION_FILE
  path.parent.mkdir(parents=True)
  path.write_text("rules\n")
  _git(repo, "add", ".")
  _git(repo, "commit", "-q", "-m", "register", date="2026-12-03T20:00:00+00:00")
  commit = _git(repo, "log", "-1", "--format=%h").strip()
  assert registration.from_git(repo) == (commit, "2026-12-03T20:00:00")
  registration.record(repo)
  shutil.rmtree(tmp_path / ".git")  # reports read the record alone (a shallow clone, an archive)
  assert registration.registered(repo) == (commit, "2026-12-03T20:00:00")
  before = registration.sentence("2026-12-02T06:32:43", repo)
  assert commit in before and "post hoc" in before
  after = registration.sentence("2026-12-04T08:00:00", repo)
  assert "after it" in after and "post hoc" not in after


def test_rows_made_between_two_registrations_name_the_one_before_them(git_repo, tmp_path):
  # A later change (rules added for other experiments) must not call rows made after the first
  # registration post hoc: they name that registration and say the file changed after them.
  repo = git_repo
  path = tmp_path / registration.REGISTRATION_FILE
  path.parent.mkdir(parents=True)
  commits = []
  for text, date in (("rules\n", "2026-12-03T20:00:00+00:00"),
                     ("rules\nmore rules\n", "2026-12-05T09:30:00+01:00")):
    path.write_text(text)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "register", date=date)
    commits.append(_git(repo, "log", "-1", "--format=%h").strip())
  first, last = (commits[0], "2026-12-03T20:00:00"), (commits[1], "2026-12-05T08:30:00")  # UTC
  assert registration.history(repo) == [first, last]
  registration.record(repo)
  shutil.rmtree(tmp_path / ".git")
  assert registration.registered(repo) == last
  assert registration.recorded_history(repo) == [first, last]
  before = registration.sentence("2026-12-02T06:32:43", repo)
  assert last[0] in before and "before that" in before and "(post hoc), not" in before
  between = registration.sentence("2026-12-04T19:11:35", repo)
  assert f"after the registration at commit {first[0]}" in between
  assert "post hoc only if those changed its rules" in between and "before that" not in between
  assert "after it." in registration.sentence("2026-12-05T09:00:00", repo)


def test_the_committed_record_names_the_commit_that_last_changed_the_registration():
  from_git = registration.from_git(REPO)
  if from_git is None:  # no git or a checkout without that history: nothing to compare with
    pytest.skip("no git history of the registration file here")
  shallow = subprocess.run(["git", "-C", REPO, "rev-parse", "--is-shallow-repository"],
                           capture_output=True, text=True).stdout.strip()
  if shallow == "true":  # the file's last commit may be cut off: git names a later one
    pytest.skip("a shallow clone")
  stale = ("REGISTRATION.md changed after results/cpu/registered.json was written: run "
           "experiments/claims.py --record_registration, commit, and regenerate the reports")
  assert registration.registered(REPO) == from_git, stale
  assert registration.recorded_history(REPO) == registration.history(REPO), stale


def test_each_rule_is_registered_by_the_first_commit_that_added_its_text(git_repo, tmp_path):
  # Two rules registered a day apart; a later edit elsewhere in the file moves neither.
  repo = git_repo
  path = tmp_path / registration.REGISTRATION_FILE
  path.parent.mkdir(parents=True)
  first, second = registration.RULES["trend"], registration.RULES["margin"]
  commits = []
  for text, date in ((f"{first}: rises\n", "2026-12-03T20:00:00+00:00"),
                     (f"{first}: rises\n{second}: a fifth\n", "2026-12-04T20:00:00+00:00"),
                     (f"intro\n{first}: rises\n{second}: a fifth\n", "2026-12-05T20:00:00+00:00")):
    path.write_text(text)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "register", date=date)
    commits.append(_git(repo, "log", "-1", "--format=%h").strip())
  registration.record(repo)
  shutil.rmtree(tmp_path / ".git")  # the record alone decides
  assert registration.status(["trend"], "2026-12-03T21:00:00", repo) == {
      "rule_commit": commits[0], "registration": registration.BEFORE}
  # the latest of a row's rules decides, and rows made before it are post hoc
  assert registration.status(["trend", "margin"], "2026-12-03T21:00:00", repo) == {
      "rule_commit": commits[1], "registration": registration.POST_HOC}
  assert registration.status(["margin"], "2026-12-04T21:00:00", repo)["registration"] == \
      registration.BEFORE
  # not known when the rows were made: post hoc, never registered first by default
  assert registration.status(["trend"], None, repo)["registration"] == registration.POST_HOC
  with pytest.raises(DataError, match="'reaches'.*--record_registration"):
    registration.status(["trend", "reaches"], "2026-12-09T00:00:00", repo)


def test_every_rule_text_is_in_the_registration_file_once():
  with open(os.path.join(REPO, registration.REGISTRATION_FILE)) as f:
    text = f.read()
  for rule, marker in registration.RULES.items():
    assert text.count(marker) == 1, (rule, marker)


def test_the_committed_record_names_each_rules_commit_and_when_the_rows_were_made():
  if not registration.history(REPO):
    pytest.skip("no git history of the registration file here")
  shallow = subprocess.run(["git", "-C", REPO, "rev-parse", "--is-shallow-repository"],
                           capture_output=True, text=True).stdout.strip()
  if shallow == "true":
    pytest.skip("a shallow clone")
  with open(os.path.join(REPO, registration.REGISTERED_FILE)) as f:
    recorded = json.load(f)
  found = registration.from_history(REPO)
  assert set(found["rules"]) == set(registration.RULES)  # every rule's text was committed
  assert (recorded["rules"], recorded["rows"]) == (found["rules"], found["rows"]), (
      "run experiments/claims.py --record_registration, commit, and regenerate the reports")
