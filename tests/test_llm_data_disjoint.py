"""Train / validation / test disjointness of llm_data's generated splits by template and by
instance content (issue 55), each read back from the records' text alone, not from the
generator's keys: an arith question's numbers (a regex; in order and as a multiset, since a
rewording may tell the same numbers in another order) and person names (found from the
pool), a function's entry-point and argument names (the signature), its constants (the
docstring's first line) and canonical body (verbatim), a strings question's quoted words, a
cross problem's name and shown example; a template by its wording (the text with that content
masked). On the tiny preset's built files and on configs/llm_study.py's quick and cpu data,
drawn in memory (a few seconds); and the same check finds the overlap the buckets prevent."""

import os
import re

import pytest

from compgen_jax.llm_data import buckets, build, code_skill, math_skill
from tests.helpers import load_config

NAMES = set(math_skill.NAMES)
HELD_PAIRS = (("validation", "train"), ("test", "train"), ("test", "validation"))


def _names(text: str) -> set[str]:
  return set(re.findall(r"\b[A-Z][a-z]+\b", text)) & NAMES


def _mask(text: str, words) -> str:
  for w in sorted(words, key=len, reverse=True):
    text = re.sub(rf"\b{re.escape(w)}\b", "W", text)
  return re.sub(r"-?\d+", "#", text)


def _numbers(found: list[str]) -> dict[str, set]:
  ordered = tuple(int(n) for n in found)
  return {"numbers": {ordered}, "number multiset": {tuple(sorted(ordered))}}


def arith(r: dict) -> tuple[dict, str]:
  q = r["question"]
  return {**_numbers(re.findall(r"\d+", q)), "person": _names(q)}, _mask(q, _names(q))


def _literals(template: str) -> set[str]:
  """What a code template's docstring says in every problem: its quoted text and numbers
  outside the {slots} (e.g. '*', -1)."""
  doc = code_skill.BY_NAME[template].doc
  return ({q for q in re.findall(r"'([^']*)'", doc) if "{" not in q}
          | set(re.findall(r"-?\d+", doc)))


def funcs(r: dict) -> tuple[dict, str]:
  entry, arg = re.match(r"def (\w+)\((\w+): ", r["prompt"]).groups()
  doc = r["prompt"].split('"""')[1].split("\n")[0]
  constants = (set(re.findall(r"'([^']*)'", doc)) | set(re.findall(r"-?\d+", doc))) - _literals(
      r["template"])
  wording = re.sub(r"'[^']*'", "'C'", _mask(doc, {arg}))
  return ({"entry": {entry}, "argument": {arg}, "constant": constants,
           "body": {r["canonical_solution"]}}, wording)


def strings(r: dict) -> tuple[dict, str]:
  quoted = re.findall(r'"([^"]*)"', r["question"])
  words = {w for q in quoted for w in q.split() if len(w) > 1}  # not a letter of them, nor '*'
  return {"word": words}, re.sub(r'"[^"]*"', '"Q"', _mask(r["question"], ()))


def cross(r: dict) -> tuple[dict, str]:
  story = r["prompt"].split('"""')[1].split("\n")[0]
  shown = re.search(r">>> \w+\(([^)]*)\)", r["prompt"]).group(1)
  return {**_numbers(shown.split(", ")), "person": _names(story)}, _mask(story, _names(story))


READ = {"arith": arith, "funcs": funcs, "strings": strings, "cross": cross}


def shared(held: list[dict], other: list[dict], read) -> dict[str, int]:
  """Per content kind and 'wording': how many of `held` share it with any of `other`."""
  atoms: dict[str, set] = {}
  wordings = set()
  for r in other:
    content, wording = read(r)
    wordings.add(wording)
    for kind, values in content.items():
      atoms.setdefault(kind, set()).update(values)
  out = {kind: 0 for kind in atoms} | {"wording": 0}
  for r in held:
    content, wording = read(r)
    out["wording"] += wording in wordings
    for kind, values in content.items():
      out[kind] += bool(values & atoms.get(kind, set()))
  return out


def overlaps(splits: dict[str, dict[str, list[dict]]]) -> dict[tuple, dict[str, int]]:
  """{(skill, held split, other split): shared(...)}; cross's splits (both of arith's training
  stories, by design: instances alone) against each other and arith's training problems."""
  out = {}
  for skill, by_split in splits.items():
    if skill == "cross":
      pairs = [("test", by_split["validation"], "validation")] + [
          (split, splits["arith"]["train"], "arith train") for split in ("test", "validation")
      ] + [(split, by_split["train"], "train") for split in ("test", "validation")]
      for held, other, name in pairs:
        content = shared(by_split[held], other, lambda r: arith(r) if "question" in r else cross(r))
        out["cross", held, name] = {k: v for k, v in content.items() if k != "wording"}
      continue
    for held, other in HELD_PAIRS:
      out[skill, held, other] = shared(by_split[held], by_split[other], READ[skill])
  return out


def _drawn(preset: str) -> dict[str, dict[str, list[dict]]]:
  data = load_config("llm_study", preset).data
  return {skill: build.draw_all(data, skill) for skill in build.SPLITS}


def _read(directory: str) -> dict[str, dict[str, list[dict]]]:
  return {skill: {split: build.read_jsonl(os.path.join(directory, build.split_file(skill, split)))
                  for split in splits} for skill, splits in build.SPLITS.items()}


def _check(splits: dict[str, dict[str, list[dict]]]) -> None:
  for where, counts in overlaps(splits).items():
    assert set(counts.values()) == {0}, (where, counts)
  # the readers find what they look for (the check is not vacuous)
  train = splits["arith"]["train"]
  assert all(arith(r)[0]["numbers"] != {()} for r in train)
  assert sum(bool(arith(r)[0]["person"]) for r in train) > len(train) / 2
  for skill in ("arith", "funcs", "strings"):
    for split in ("train", "validation", "test"):
      assert splits[skill][split], (skill, split)
  assert any(funcs(r)[0]["constant"] for r in splits["funcs"]["test"])
  assert all(strings(r)[0]["word"] for r in splits["strings"]["test"])


def test_the_tiny_presets_files_are_disjoint(tiny_llm_data):
  cfg, directory = tiny_llm_data
  splits = _read(directory)
  _check(splits)
  for skill in ("arith", "funcs", "strings"):
    templates = {split: {r["template"] for r in splits[skill][split]} for split in
                 ("train", "validation", "test")}
    assert templates["validation"] <= set(cfg[skill].validation_templates)
    assert templates["test"] <= set(cfg[skill].test_templates)
    assert not templates["train"] & (templates["validation"] | templates["test"])


@pytest.mark.parametrize("preset", ["quick", "cpu"])
def test_the_study_presets_data_is_disjoint(preset):
  splits = _drawn(preset)
  _check(splits)
  for skill, by_split in splits.items():
    for split, records in by_split.items():
      if split in ("validation", "test"):
        assert len(records) >= 200, (skill, split)


def test_without_the_buckets_the_check_finds_shared_content(monkeypatch):
  """Every split drawing from every atom (the design before issue 55): the same readers find
  test problems whose numbers, names, argument names and words are trained."""
  monkeypatch.setattr(buckets, "for_split", lambda cfg, split: buckets.ANY)
  found = overlaps(_drawn("quick"))
  assert found["arith", "test", "train"]["number multiset"] > 100
  assert found["arith", "test", "train"]["person"] > 100
  assert found["funcs", "test", "train"]["argument"] > 100
  assert found["funcs", "test", "train"]["body"] > 0
  assert found["strings", "test", "train"]["word"] > 100
  assert found["arith", "test", "train"]["wording"] == 0  # the templates stay held out


def test_buckets_are_a_stable_partition_with_the_configured_shares():
  """Each atom's bucket from its sha256 (recomputed here) against the shares; over 20,000
  number tuples the shares hold to within 2 points; a split of the config draws its own."""
  import hashlib  # noqa: PLC0415 - this test's independent re-computation

  tuples = [(a, b, c) for a in range(2, 30) for b in range(2, 30) for c in range(2, 30)]
  got = [buckets.bucket_of("numbers", t, 0.3, 0.1) for t in tuples]
  for t, bucket in zip(tuples[:50], got, strict=False):
    u = int.from_bytes(hashlib.sha256(f"numbers\0{t!r}".encode()).digest()[:8], "big") / 2 ** 64
    assert bucket == ("test" if u < 0.1 else "validation" if u < 0.4 else "train")
  shares = {b: got.count(b) / len(got) for b in buckets.BUCKETS}
  assert abs(shares["test"] - 0.1) < 0.02 and abs(shares["validation"] - 0.3) < 0.02
  cfg = load_config("llm_study", "test").data
  assert buckets.for_split(cfg, "seen") == buckets.for_split(cfg, "train")
  assert buckets.for_split(cfg, "test").pool("person", math_skill.NAMES) == [
      n for n in math_skill.NAMES if buckets.bucket_of("person", n, 0.25, 0.25) == "test"]


def test_entry_points_belong_to_one_template_and_arguments_shadow_nothing():
  """Entry-point names are split with their templates (no bucket), so none may recur in
  another template; argument names are no entry point, builtin or loop variable a body uses."""
  entries = [n for t in code_skill.TEMPLATES for n in t.names]
  assert len(entries) == len(set(entries))
  arguments = [a for pool in code_skill.ARGS.values() for a in pool]
  assert len(arguments) == len(set(arguments))
  used = {w for t in code_skill.TEMPLATES  # names, not attributes (.count)
          for w in re.findall(r"(?<![.\w])[A-Za-z_]\w*", re.sub(r"\{\w\}", "", t.body))}
  assert not set(arguments) & (set(entries) | used)
