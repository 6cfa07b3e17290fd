"""LLM composition on benchmarks (llm_eval): export round trip, systems, merges, config errors,
the binary, scoring (decoding through the text pipeline: test_llm_decoding.py)."""

import copy
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sentencepiece as spm

from compgen_jax.composition import arithmetic
from compgen_jax.llm_data import build
from compgen_jax.llm_eval import decoding, report, runner, sandbox, systems, tiny
from compgen_jax.lm import gemma2, hf_export
from compgen_jax.types import CheckpointError, ConfigError
from tests import helpers

pytestmark = pytest.mark.heavy  # collected first (tests/conftest.py)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "gemma2_tiny")


def test_export_round_trips_through_the_loader(tmp_path):
  """Our writer is the inverse of the HF loader: the fixture (written by HF) survives export."""
  model, params = gemma2.load(FIXTURE)
  hf, _ = gemma2.loading.read_config(FIXTURE)
  c = gemma2.config_from_hf(hf)
  hf_export.write(str(tmp_path / "out"), c, params, os.path.join(FIXTURE, "tokenizer.model"))
  _, again = gemma2.load(str(tmp_path / "out"))
  jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)),
               params, again)
  written = json.load(open(tmp_path / "out" / "config.json"))
  assert gemma2.config_from_hf(written) == c
  # an int, as HF writes it (transformers 5 refuses 16.0 when it loads the export)
  assert type(written["query_pre_attn_scalar"]) is type(hf["query_pre_attn_scalar"]) is int
  ref = np.load(os.path.join(FIXTURE, "logits.npz"))  # and still matches Hugging Face's logits
  logits = gemma2.make_model(c).apply(again, ref["tokens"], None, ref["valid"])[0]
  np.testing.assert_allclose(np.asarray(logits)[:2], ref["logits"][:2], atol=1e-4)


def test_tiny_models_are_deterministic_and_share_one_model_object(tmp_path, tiny_models):
  cfg, paths, loaded = tiny_models
  again = tiny.ensure_models(str(tmp_path), cfg.tiny_models, ["base", "math"],
                             ["Question: what is 2 + 3?\nAnswer: 5",
                              "def add(a, b):\n    return a + b"] * 20, 0)
  _, p0 = gemma2.load(paths["math"])
  _, p1 = gemma2.load(again["math"])
  jax.tree.map(np.testing.assert_array_equal, p0, p1)
  assert loaded.models["base"] is loaded.models["math"] is loaded.models["coding"]
  sp = spm.SentencePieceProcessor(model_file=os.path.join(paths["base"], "tokenizer.model"))
  text = "Résumé: 12,345 ≠ 7\t{x}"  # byte fallback: any string round-trips
  assert sp.decode(sp.encode(text)) == text


def test_print_config_shows_the_composition_spec(tmp_path):
  proc = _binary("--config=configs/llm.py:tiny", f"--workdir={tmp_path / 'w'}",
                 "--config.compose.mask=top_p", "--print_config",
                 "--config.compositions.composed_selective.compose.gate_tau=0.3")
  assert proc.returncode == 0, proc.stderr[-2000:]
  printed = json.loads(proc.stdout)
  assert printed["compose"]["mask"] == "top_p" and printed["compose"]["operator"] == "authors"
  assert {"gate", "gate_tau", "eos", "mask_p", "mask_alpha"} <= set(printed["compose"])
  assert {"top_k", "top_p", "min_p"} <= set(printed["generate"])
  assert printed["components"]["unconditional"] == {"model": "base", "template": "", "weight": -0.5}
  assert printed["compositions"]["composed_selective"] == {  # a system's own spec fields
      "experts": ["math", "coding"], "compose": {"gate": "kl", "gate_tau": 0.3}}
  assert not os.path.exists(tmp_path / "w")


def test_merges_are_computed_in_float32_from_the_members(tiny_models):
  cfg, _, loaded = tiny_models
  resolved = {s.name: s for s in systems.resolve(cfg)}
  (_,), (ta,) = systems.system_params(cfg, loaded, resolved["task_arithmetic"])
  want = arithmetic.task_arithmetic(loaded.params["base"],
                                    [loaded.params["math"], loaded.params["coding"]], 1.0)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6), ta, want)
  ref = jax.tree.map(lambda b, m, c: np.asarray(m, np.float64) + np.asarray(c, np.float64)
                     - np.asarray(b, np.float64),
                     loaded.params["base"], loaded.params["math"], loaded.params["coding"])
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5), ta, ref)


@pytest.mark.parametrize("field, value, match", [
    ("systems", ("base", "nope"), "unknown system 'nope'"),
    ("background", "nope", "'background'.*unknown 'nope'; allowed: base, "),
    ("run", ("gsm8k", "squad"), "'run'.*unknown 'squad'; allowed: gsm8k, "),
    ("generate.max_new_tokens", 0, "generate.max_new_tokens"),
    ("dtype", "float16", "dtype"),
    ("compose.mask", "nucleus", "'compose.mask'.*unknown 'nucleus'"),
    ("compose.gate_tau", -1.0, "compose.gate_tau"),
    ("compose.lam", (1.0, 1.0), "'compose.lam'.*all weights 1"),  # the authors' operator
    ("compositions.composed", ("math", "nope"), "'compositions.composed'.*unknown 'nope'"),
    ("generate.draft_len", -1, "generate.draft_len"),
    ("systems", ("base", "guided"), "components.unconditional.weight"),  # authors: weights 1
])
def test_bad_config_is_refused_naming_the_field(field, value, match):
  cfg = helpers.llm_config()
  with cfg.unlocked():
    section, _, name = field.rpartition(".")
    (cfg[section] if section else cfg)[name] = value
  with pytest.raises(ConfigError, match=match):
    runner.validate(cfg)


def test_missing_checkpoint_is_refused_before_loading(tmp_path):
  cfg = helpers.llm_config("paper")
  with cfg.unlocked():
    cfg.run = ()
  with pytest.raises(ConfigError, match="models.base"):
    runner.validate(cfg)
  with cfg.unlocked():
    cfg.models.update(base=str(tmp_path), math=str(tmp_path), coding=str(tmp_path))
  with pytest.raises(CheckpointError, match="config.json"):
    runner.validate(cfg)


def _binary(*args):
  return subprocess.run([sys.executable, os.path.join(ROOT, "experiments", "train.py"),
                         *args], capture_output=True, text=True, cwd=ROOT, timeout=600)


def test_binary_runs_resumes_and_reports(tmp_path):
  """The tiny preset end to end: models written, every (benchmark, system) scored, a report;
  a rerun after deleting half a results file regenerates exactly the missing rows."""
  w = str(tmp_path / "w")
  proc = _binary("--config=configs/llm.py:tiny", f"--workdir={w}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  summary = [json.loads(line) for line in open(os.path.join(w, "summary.jsonl"))]
  cfg = helpers.llm_config()
  assert {(r["benchmark"], r["system"]) for r in summary} == {
      (b, s) for b in cfg.run for s in cfg.systems}
  for r in summary:
    assert 0.0 <= r["accuracy"] <= 1.0 and r["num_problems"] >= 1
  comp3 = next(r for r in summary if r["system"] == "composed_3")
  assert len(comp3["active_frac_K"]) == 3 and len(comp3["mean_p_eos_M"]) == 4
  assert os.path.isfile(os.path.join(w, "report.md"))
  assert os.path.isfile(os.path.join(w, "accuracy.png"))
  path = os.path.join(w, "gsm8k", "composed.jsonl")
  lines = open(path).read().splitlines(keepends=True)
  with open(path, "w") as f:
    f.writelines(lines[:1] + [lines[1][:10]])  # one row kept, a torn second line
  proc = _binary("--config=configs/llm.py:tiny", f"--workdir={w}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  key = lambda line: tuple(json.loads(line)[k] for k in ("id", "raw", "num_tokens", "correct"))
  again = open(path).read().splitlines(keepends=True)
  assert sorted(map(key, again)) == sorted(map(key, lines))  # greedy: the same rows again
  summary2 = [json.loads(line) for line in open(os.path.join(w, "summary.jsonl"))]
  assert [r["accuracy"] for r in summary2] == [r["accuracy"] for r in summary]


def test_binary_refuses_a_missing_data_file_in_one_line(tmp_path):
  proc = _binary("--config=configs/llm.py:tiny", f"--workdir={tmp_path / 'w'}",
                 f"--config.benchmarks.gsm8k.path={tmp_path / 'missing.jsonl'}")
  assert proc.returncode == 2
  assert "missing.jsonl" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
  assert not (tmp_path / "w").exists()


def _oracle(vocab_size: int, eos_id: int, scripts: dict) -> gemma2.Model:
  """A model that, after a prompt, writes that prompt's script and then EOS: it hashes every
  token it has seen (uint32 rolling hash, valid tokens only) and looks the next token up in a
  table built on the host from (prompt + script prefix) -> next token."""
  def rolling(h, t):  # the device's uint32 arithmetic, wrapping
    return (h * 1_000_003 + t + 1) % 2**32

  table = {}
  for prompt, script in scripts.items():
    h = 0
    for t in prompt:
      h = rolling(h, t)
    for t in list(script) + [eos_id]:
      table[h] = t
      h = rolling(h, t)
  keys = np.array(sorted(table), np.uint32)
  nexts = np.array([table[int(k)] for k in keys], np.int32)
  keys, nexts = jnp.asarray(keys), jnp.asarray(nexts)

  def apply(params, tokens_BxL, cache, valid_BxL):
    del params

    def body(h_B, xs):
      t_B, v_B = xs
      h_B = jnp.where(v_B, h_B * jnp.uint32(1_000_003) + (t_B + 1).astype(jnp.uint32), h_B)
      i_B = jnp.clip(jnp.searchsorted(keys, h_B), 0, len(keys) - 1)
      hit_B = keys[i_B] == h_B
      logits = jnp.where(hit_B[:, None], 30.0 * jax.nn.one_hot(nexts[i_B], vocab_size), 0.0)
      return h_B, logits

    h_B, logits_LxBxV = jax.lax.scan(body, cache["h"], (tokens_BxL.T, valid_BxL.T))
    return logits_LxBxV.swapaxes(0, 1), {"h": h_B}

  return gemma2.Model(apply=apply, init_cache=lambda b, n: {"h": jnp.zeros((b,), jnp.uint32)},
                      vocab_size=vocab_size, bos_id=2, eos_id=eos_id, pad_id=0,
                      positions_count="tokens")  # a hash of the valid tokens


@pytest.mark.parametrize("bench_name, answer", [
    ("gsm8k", lambda t: " " + t["answer"] + "\n\nQuestion: more text after the stop string"),
    ("math", lambda t: f" So the answer is $\\boxed{{{t['gold']}}}$.\nProblem: next"),
    ("humaneval_plus", None), ("mbpp_plus", None),
    ("strings", lambda t: " " + t["answer"] + "\nQuestion: more"), ("cross", None)])
def test_a_model_that_writes_the_answers_scores_every_problem(tmp_path, tiny_models, bench_name,
                                                              answer, request):
  """The whole text path (tokenizing, batched decoding, detokenizing, stop strings, extraction,
  scoring) gives 100% to a model that writes the gold answers, and 0% to one that writes
  something else: the pipeline measures what the model writes, nothing else."""
  from compgen_jax.llm_eval import benchmarks  # noqa: PLC0415

  cfg, _, loaded = tiny_models
  cfg = copy.deepcopy(cfg)
  with cfg.unlocked():
    cfg.generate.update(max_new_tokens=160, batch_size=3)
  if bench_name in ("strings", "cross"):  # llm_data's generated skills (tests/test_llm_data.py)
    _, directory = request.getfixturevalue("tiny_llm_data")
    cfg.benchmarks[bench_name].update(build.benchmark_settings(directory)[bench_name])
    if bench_name == "strings":
      cfg.benchmarks.strings.num_fewshot = 2
  bench = benchmarks.BENCHMARKS[bench_name]
  problems = bench.load(cfg.benchmarks[bench_name])
  sp, bos = loaded.tokenizer, loaded.models["base"].bos_id
  lines = {json.dumps(json.loads(line), sort_keys=True): json.loads(line)
           for line in open(cfg.benchmarks[bench_name].path)}
  raw = list(lines.values())
  for right in (True, False):
    scripts = {}
    for i, p in enumerate(problems):
      if bench_name == "math":
        text = answer({"gold": raw[i]["solution"].rsplit("boxed{", 1)[1].rsplit("}", 1)[0]})
      elif answer is not None:
        text = answer(raw[i])
      else:
        sol = raw[i]["canonical_solution"]
        text = sol if bench_name != "mbpp_plus" else sol + "\nassert False\n"
      text = text if right else " I do not know.\n\nQuestion: Problem:\nassert 0\n"
      scripts[tuple(decoding.encode(sp, bos, p.prompt))] = sp.encode(text)
    model = _oracle(loaded.models["base"].vocab_size, loaded.models["base"].eos_id, scripts)
    oracle = systems.Loaded({"oracle": model}, {"oracle": None}, sp)
    w = str(tmp_path / f"w{right}")
    runner.run_one(cfg, oracle, systems.System("oracle", "single", ("oracle",)), bench_name,
                   problems, w)
    rows = [json.loads(line) for line in open(os.path.join(w, bench_name, "oracle.jsonl"))]
    assert len(rows) == len(problems) and all(r["finish"] != "budget" for r in rows)
    assert [r["correct"] for r in rows] == [right] * len(problems), rows
    with cfg.unlocked():
      cfg.run = (bench_name,)
    [summary] = runner.summarize(w, cfg, [systems.System("oracle", "single", ("oracle",))])
    assert summary["accuracy"] == float(right)
    if bench_name in ("humaneval_plus", "mbpp_plus", "cross"):  # says how code was scored
      assert summary["scored_isolated"] == float(sandbox.isolation_problem() is None)
    else:
      assert "scored_isolated" not in summary


def test_report_names_what_was_scored_unisolated():
  rows = [dict(benchmark="gsm8k", system="base", accuracy=0.5),
          dict(benchmark="mbpp_plus", system="base", accuracy=0.5, scored_isolated=1.0),
          dict(benchmark="humaneval_plus", system="composed", accuracy=0.5, scored_isolated=0.0)]
  note = report.unisolated_note(rows)
  assert "humaneval_plus / composed (100% of problems)" in note and "mbpp_plus" not in note
  assert report.unisolated_note(rows[:2]) == ""
