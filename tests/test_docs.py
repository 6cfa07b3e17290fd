"""docs/ is a set of references (issue 58): each page short enough to read for one job, no dated
measurement in it (those live beside their runs in results/), and every relative link in docs/*.md
and README.md pointing to a file that exists."""

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
MAX_CHARS = 15_000
MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|December"
          "|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec")
# 2026-12-07, 2026-12-04/05, "December 7", "Dec. 7, 2026", "7 December 2026"
DATE = re.compile(rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b(?:{MONTHS})\.? \d{{1,2}}(?:st|nd|rd|th)?\b"
                  rf"|\b\d{{1,2}} (?:{MONTHS}) \d{{4}}\b")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _name(path: str) -> str:
  return os.path.relpath(path, ROOT)


def test_there_are_docs():
  assert len(DOCS) >= 10


@pytest.mark.parametrize("path", DOCS, ids=_name)
def test_each_doc_is_short_enough_to_be_a_reference(path):
  size = len(open(path, encoding="utf-8").read())
  assert size <= MAX_CHARS, f"{_name(path)} has {size} characters (at most {MAX_CHARS}): split " \
      f"it, or move measurements beside their runs in results/"


@pytest.mark.parametrize("path", DOCS, ids=_name)
def test_no_doc_holds_a_dated_measurement(path):
  text = open(path, encoding="utf-8").read()
  found = [(text.count("\n", 0, m.start()) + 1, m.group(0)) for m in DATE.finditer(text)]
  assert not found, f"{_name(path)}: dates at lines {found}; a dated measurement belongs in " \
      f"results/**/NOTES.md beside its run"


def test_the_date_pattern_finds_dates():
  for text in ("measured 2026-12-07", "on December 7, 2026", "Dec. 4", "7 December 2026"):
    assert DATE.search(text), text
  for text in ("issue 57 item 7", "M=16, K=3", "lr 3e-4", "0.9265", "May be"):
    assert not DATE.search(text), text


@pytest.mark.parametrize("path", DOCS + [os.path.join(ROOT, "README.md")], ids=_name)
def test_every_relative_link_points_to_a_file(path):
  text = open(path, encoding="utf-8").read()
  missing = []
  for target in LINK.findall(text):
    if target.startswith(("http://", "https://", "mailto:", "#")):
      continue
    file = target.split("#", 1)[0]
    if not os.path.exists(os.path.join(os.path.dirname(path), file)):
      missing.append(target)
  assert not missing, f"{_name(path)} links to missing files: {missing}"
