"""The claims table (analysis/claims.py, experiments/claims.py): every <experiment>/claims.json of
a results dir into RESULTS/claims.json and the README's table; idempotent; malformed files are
refused before anything is written."""

import json
import os
import subprocess
import sys

import pytest

from compgen_jax.analysis import claims
from compgen_jax.types import ConfigError
from tests.helpers import REPO

README = """# The paper's experiments at CPU scale

Reports of the cpu presets,
written by make.

| experiment | report |
|---|---|
| data scaling | [REPORT.md](data_scaling/REPORT.md) |
"""


def _claim(experiment, claim, verdict="shown", figure=None, **extra):
  return {"experiment": experiment, "claim": claim, "paper": "1.0", "ours": "0.93 ± 0.01 (2 seeds)",
          "seeds": 2, "verdict": verdict, "figure": figure, "note": "", "composition": "gap 0.01",
          "against_paper": "reaches it", "rules": ["rises_tasks"], "rule_commit": "abc1234",
          "registration": "post hoc", **extra}


@pytest.fixture
def results(tmp_path):
  """A results dir with two sweeps' claims.json (the second file's claims listed out of order)."""
  for experiment, records in (
      ("model_size", [_claim("model_size", "wider is better", "partial")]),
      ("data_scaling", [_claim("data_scaling", "OOD rises with tasks", figure="ds.png"),
                        _claim("data_scaling", "decodability | OOD", "not shown")])):
    os.makedirs(tmp_path / experiment)
    (tmp_path / experiment / "claims.json").write_text(json.dumps(records))
  (tmp_path / "data_scaling" / "ds.png").write_bytes(b"png")
  (tmp_path / "README.md").write_text(README)
  return tmp_path


def test_table_goes_between_markers_after_the_first_paragraph(results):
  claims_path, readme_path = claims.write(str(results))
  merged = json.loads(open(claims_path).read())
  assert [(c["experiment"], c["claim"]) for c in merged] == [
      ("data_scaling", "OOD rises with tasks"), ("data_scaling", "decodability | OOD"),
      ("model_size", "wider is better")]  # by experiment, each file's order kept
  assert merged[0]["figure"] == "data_scaling/ds.png" and merged[2]["figure"] is None
  text = open(readme_path).read()
  head, rest = text.split(claims.BEGIN)
  table, tail = rest.split(claims.END)
  assert head == README.split("\n\n| experiment")[0] + "\n\n"  # heading + first paragraph
  assert tail == "\n\n| experiment" + README.split("\n\n| experiment")[1]  # the rest untouched
  assert ("| claim | paper | ours (mean ± s.d., seeds) | verdict | composition (OOD against ID) "
          "| against the paper's value | rule registered | figure |") in table
  assert ("| OOD rises with tasks (data_scaling) | 1.0 | 0.93 ± 0.01 (2 seeds) | **shown** | "
          "gap 0.01 | reaches it | post hoc (abc1234) | [ds.png](data_scaling/ds.png) |") in table
  assert "| decodability \\| OOD (data_scaling) |" in table  # a | in a cell is escaped
  assert ("| wider is better (model_size) | 1.0 | 0.93 ± 0.01 (2 seeds) | **partial** | gap 0.01 "
          "| reaches it | post hoc (abc1234) | - |") in table
  # The summary above the table counts the verdicts: shown and reaching the paper: reproduced.
  assert ("**reproduced** (shown, and the interval reaches the paper's value or direction): 1 "
          "(registered before its runs 0, post hoc 1; data_scaling 1).") in table
  assert "**only as a trend at CPU scale** (shown in part, or short of the paper's value): 1 " \
      "(registered before its runs 0, post hoc 1; model_size 1)." in table


def test_a_second_run_is_idempotent_and_updates_in_place(results):
  claims.write(str(results))
  first = [open(results / name).read() for name in ("README.md", "claims.json")]
  claims.write(str(results))
  assert [open(results / name).read() for name in ("README.md", "claims.json")] == first
  path = results / "model_size" / "claims.json"
  path.write_text(json.dumps([_claim("model_size", "wider is better", "shown")]))
  claims.write(str(results))
  text = open(results / "README.md").read()
  assert text.count(claims.BEGIN) == 1 and text.count(claims.END) == 1
  assert "| wider is better (model_size) | 1.0 | 0.93 ± 0.01 (2 seeds) | **shown** |" in text
  table = [line for line in text.split("\n") if line.startswith("| wider")]
  assert [line.replace("**shown**", "**partial**") for line in table] == [
      line for line in first[0].split("\n") if line.startswith("| wider")]


@pytest.mark.parametrize("record, field, message", [
    ({"verdict": "proven"}, "claims.verdict", "'proven' is not one of 'shown'"),
    ({"seeds": "2"}, "claims.seeds", "is not an integer"),
    ({"figure": "missing.png"}, "claims.figure", "no figure 'missing.png'"),
    ({"extra": 1}, "claims.extra", "unknown field"),
    ({"ours": None}, "claims.ours", "is not a string"),
])
def test_a_malformed_file_names_the_file_and_field_and_writes_nothing(results, record, field,
                                                                       message):
  claims.write(str(results))
  before = [open(results / name).read() for name in ("README.md", "claims.json")]
  bad = results / "model_size" / "claims.json"
  bad.write_text(json.dumps([_claim("model_size", "x"), {**_claim("model_size", "y"), **record}]))
  with pytest.raises(ConfigError, match=message) as error:
    claims.write(str(results))
  assert error.value.field == field and f"{str(bad)!r}[1]" in str(error.value)
  assert [open(results / name).read() for name in ("README.md", "claims.json")] == before


def test_missing_fields_and_non_lists_are_refused(results):
  bad = results / "model_size" / "claims.json"
  record = _claim("model_size", "x")
  del record["verdict"]
  bad.write_text(json.dumps([record]))
  with pytest.raises(ConfigError, match=r"\[0\]: missing") as error:
    claims.write(str(results))
  assert error.value.field == "claims.verdict"
  for text, message in (("{}", "holds a JSON dict, not a list"), ("[1,", "not valid JSON"),
                        ("[3]", r"\[0\] is not an object")):
    bad.write_text(text)
    with pytest.raises(ConfigError, match=message):
      claims.write(str(results))
  assert not os.path.exists(results / "claims.json")
  with pytest.raises(ConfigError, match="not a directory"):
    claims.write(str(results / "nowhere"))


def test_markers_go_after_the_code_block_the_first_paragraph_leads_into():
  readme = "# R\n\nWritten by\n\n```bash\nmake x\n\nmake y\n```\n\nMore.\n"
  assert claims.with_table(readme, "T") == (
      f"# R\n\nWritten by\n\n```bash\nmake x\n\nmake y\n```\n\n{claims.BEGIN}\nT\n"
      f"{claims.END}\n\nMore.\n")
  assert claims.with_table("# R\n\nP.\n", "T") == f"# R\n\nP.\n\n{claims.BEGIN}\nT\n{claims.END}\n"


def test_one_marker_alone_is_refused():
  with pytest.raises(ConfigError, match="one claims marker"):
    claims.with_table(f"# R\n\n{claims.BEGIN}\n", "t")
  with pytest.raises(ConfigError, match="one claims marker"):
    claims.with_table(f"# R\n\n{claims.END}\n{claims.BEGIN}\n", "t")


def test_binary(results):
  binary = os.path.join(REPO, "experiments", "claims.py")
  done = subprocess.run([sys.executable, binary, f"--results_dir={results}"],
                        capture_output=True, text=True, cwd=REPO)
  assert done.returncode == 0, done.stderr[-2000:]
  assert done.stdout.split() == [str(results / "claims.json"), str(results / "README.md")]
  (results / "data_scaling" / "claims.json").write_text("[1,")
  done = subprocess.run([sys.executable, binary, f"--results_dir={results}"],
                        capture_output=True, text=True, cwd=REPO)
  assert done.returncode == 2 and "not valid JSON" in done.stderr
  assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr


def test_the_summary_counts_untestable_and_contradicted_claims():
  records = [_claim("a", "x", "shown", against_paper="the paper gives a direction, no value: "
                    "ours agrees"),
             _claim("a", "y", "not testable here", against_paper="-"),
             _claim("b", "z", "shown", against_paper="not testable here yet: one K"),
             _claim("b", "w", "not shown", ours="0.88 vs 0.92",
                    against_paper="the paper gives a direction, no value: ours contradicts it"),
             _claim("b", "v", "not judged", against_paper="-")]
  records[0]["registration"] = "registered before its runs"
  text = claims.summary(records)
  assert ("(shown, and the interval reaches the paper's value or direction): 1 (registered "
          "before its runs 1, post hoc 0; a 1).") in text
  assert "the reason is in the row): 2 (registered before its runs 0, post hoc 2; a 1, b 1)." \
      in text
  assert ("**contradicted** by these runs: 1 (registered before its runs 0, post hoc 1; b 1); w "
          "(b, post hoc: 0.88 vs 0.92).") in text
  assert "without contradicting): 1 (registered before its runs 0, post hoc 1; b 1)." in text


def test_each_row_says_when_its_rule_was_registered(results):
  claims.write(str(results))
  text = open(results / "README.md").read()
  assert "| gap 0.01 | reaches it | post hoc (abc1234) | [ds.png](data_scaling/ds.png) |" in text
  # a row without a known rule, or with another registration word, is refused
  for field, value in (("rules", ["a rule nobody registered"]), ("rules", []),
                       ("registration", "pre-registered")):
    (results / "model_size" / "claims.json").write_text(json.dumps(
        [_claim("model_size", "wider is better", **{field: value})]))
    with pytest.raises(ConfigError) as error:
      claims.write(str(results))
    assert error.value.field == f"claims.{field}"


def test_a_verdict_a_rerun_flips_is_marked_fragile(results):
  claims.write(str(results))
  before = open(results / "claims.json").read()
  for machine, experiment, records in (
      ("F", "model_size", [_claim("model_size", "wider is better", "not shown")]),
      ("F", "data_scaling", [_claim("data_scaling", "OOD rises with tasks", "shown"),
                             _claim("data_scaling", "a claim not committed", "partial")]),
      ("G", "model_size", [_claim("model_size", "wider is better", "shown")])):
    os.makedirs(results / "reruns" / machine / experiment)
    (results / "reruns" / machine / experiment / "claims.json").write_text(json.dumps(records))
  claims.write(str(results))
  text = open(results / "README.md").read()
  assert ("| wider is better (model_size) | 1.0 | 0.93 ± 0.01 (2 seeds) | **partial** (fragile: "
          "flips on a rerun, machine F: not shown; machine G: shown) | gap 0.01 |") in text
  assert "| OOD rises with tasks (data_scaling) | 1.0 | 0.93 ± 0.01 (2 seeds) | **shown** |" \
      in text  # the same verdict on the rerun: not marked; the decodability claim was not rerun
  assert "| decodability \\| OOD (data_scaling) | 1.0 | 0.93 ± 0.01 (2 seeds) | **not shown** |" \
      in text
  assert ("on another machine, `reruns/`; counted above as committed): 1 (registered before its "
          "runs 0, post hoc 1; model_size 1); wider is better (model_size: partial, F: not shown, "
          "G: shown).") in text
  assert open(results / "claims.json").read() == before  # the committed verdicts, as they were
  # A rerun of an experiment with no committed claims is refused before anything is written.
  os.makedirs(results / "reruns" / "F" / "nowhere")
  (results / "reruns" / "F" / "nowhere" / "claims.json").write_text(
      json.dumps([_claim("nowhere", "x")]))
  with pytest.raises(ConfigError, match="a rerun of 'nowhere', which has no claims") as error:
    claims.write(str(results))
  assert error.value.field == "reruns" and open(results / "README.md").read() == text
