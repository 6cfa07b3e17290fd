"""The letters report's tables, computed from the committed run rows alone (letters/report.py
draws the figures and writes report.md from them)."""

import json
import os
from collections import defaultdict

import numpy as np

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import fields
from compgen_jax.analysis.verdicts import clipped, mean_interval
from compgen_jax.composition.spec import EOS_RULES
from compgen_jax.letters.training import SCRATCH

EXPERIMENTS = ("substitution", "length", "baselines", "background", "violations", "k_experts",
               "k_baselines", "arithmetic")
# Evaluate-only passes over a trained run under other step specs, one folder each with the run's
# config.json and the pass's <experiment>/results.jsonl (its rows say the spec)
STEP_SPECS_DIR = "step_specs"


def number(v) -> float:
  return float(v) if not isinstance(v, list) else float(np.max(v))


def load_runs(results_dir: str, subdir: str = workdir_lib.RUNS_DIR) -> dict[str, dict]:
  """{run name: {'config', 'metrics', <experiment>: rows}} in name order, of the folders in
  <results_dir>/<subdir> (none when it does not exist)."""
  runs = {}
  root = os.path.join(results_dir, subdir)
  names = sorted(os.listdir(root)) if os.path.isdir(root) else []
  for name in [n for n in names if os.path.isdir(os.path.join(root, n))]:
    with open(os.path.join(root, name, workdir_lib.CONFIG_FILE)) as f:
      run = {"config": json.load(f),
             "metrics": metric_writer.read_rows(os.path.join(root, name, SCRATCH,
                                                             workdir_lib.METRICS_FILE))}
    for exp in EXPERIMENTS:
      rows = metric_writer.read_rows(os.path.join(root, name, exp, "results.jsonl"))
      if rows:
        run[exp] = rows
    runs[name] = run
  return runs


def composition_variant(cfg: dict) -> str:
  return ("one pass, per position" if cfg["data"]["layout"] == "position"
          else f"lockstep decoding ({cfg['data']['layout']})")


def setting(cfg: dict) -> str:
  """A trained run's setting in words: preset, composition, inits (and GPT-2's initialisation
  where the model used it)."""
  gpt2 = ", GPT-2 init" if cfg["model"].get("init", "flax") == "gpt2" else ""
  return f"{cfg['preset']}, {composition_variant(cfg)}, {cfg['init']} inits{gpt2}"


def interval_text(values) -> str:
  """Mean over seeds and its 95% t-interval (analysis.verdicts.mean_interval), held inside
  [0, 1] (exact match)."""
  ci = clipped(mean_interval(values), (0.0, 1.0))  # exact match's bounds
  if ci is None:
    return f"{np.mean(values):.3f}"
  return f"{ci.estimate:.3f} [{ci.low:.3f}, {ci.high:.3f}]"


def step_spec_rows(passes: dict) -> list[list]:
  """Per trained setting, pair and step spec (every pass's substitution rows): exact match,
  mean over seeds with its interval, and per seed."""
  groups = defaultdict(list)
  for run in passes.values():
    for r in run.get("substitution", []):
      groups[(setting(run["config"]), r["pair"], r["spec"])].append(number(r["exact_match"]))
  return [[*key, interval_text(em), ", ".join(f"{v:.3f}" for v in em)]
          for key, em in groups.items()]


def k_spec_columns(passes: dict) -> list[str]:
  """The step specs of the passes' k-experts rows: the paper's operator under each EOS rule
  (spec.describe's words: 'paper', 'paper, eos=vote', ...) first, then any other spec."""
  specs = {r["spec"] for run in passes.values() for r in run.get("k_experts", [])}
  eos = ["paper" if e == "composed" else f"paper, eos={e}" for e in EOS_RULES]
  return [e for e in eos if e in specs] + sorted(specs - set(eos))


def k_spec_rows(passes: dict) -> list[list]:
  """Per trained setting and k, the k-experts exact match under each step spec of
  `k_spec_columns`, mean with its interval over seeds ('' where no pass ran it)."""
  groups = defaultdict(list)
  for run in passes.values():
    for r in run.get("k_experts", []):
      groups[(setting(run["config"]), int(r["k"]), r["spec"])].append(number(r["exact_match"]))
  keys = sorted({(s, k) for s, k, _ in groups})
  return [[s, k, *[interval_text(groups[(s, k, c)]) if (s, k, c) in groups else ""
                   for c in k_spec_columns(passes)]] for s, k in keys]


def final_losses(metrics: list[dict]) -> dict[str, float]:
  """Training loss of the scratch phase's last logged chunk (mean over its steps), mean over
  seeds, per task."""
  last = max(r["step"] for r in metrics)
  by_task = defaultdict(list)
  for r in metrics:
    if r["step"] == last:
      by_task[r["task"]].append(r["train/loss"])
  return {t: float(np.mean(v)) for t, v in by_task.items()}


def setting_rows(runs: dict) -> list[list]:
  rows = []
  for name, run in runs.items():
    c, loss = run["config"], final_losses(run["metrics"])
    det = [v for t, v in loss.items() if "|" not in t]  # mixtures keep their entropy
    m, t = c["model"], c["train"]
    rows.append([name, c["preset"], composition_variant(c), c["init"], c["num_seeds"],
                 f"{m['width']} / {m['positions']} / {'tied' if m['tie_head'] else 'untied'}"
                 + (" / GPT-2 init" if m.get("init", "flax") == "gpt2" else ""),
                 f"{t['num_steps']} x {t['batch_size']}", f"{c['optim']['learning_rate']:g}",
                 f"{np.mean(det):.2g} (max {max(det):.2g})"])
  return rows


def em_rows(runs: dict) -> list[list]:
  rows = []
  for name, run in runs.items():
    by_pair = defaultdict(list)
    for r in run.get("substitution", []):
      by_pair[r["pair"]].append(r)
    for pair, rs in by_pair.items():
      em = [number(r["exact_match"]) for r in rs]
      rows.append([name, pair, float(np.mean(em)), float(np.min(em)),
                   ", ".join(f"{v:.3f}" for v in em),
                   ", ".join(f"{number(r['exact_match_all_sources']):.3f}" for r in rs)])
  return rows


def qualitative_rows(runs: dict, pair: str) -> list[list]:
  rows = []
  for name, run in runs.items():
    rs = [r for r in run.get("substitution", []) if r["pair"] == pair]
    if rs and rs[0].get("qualitative"):
      for q in rs[0]["qualitative"]:
        rows.append([name, q] + [r["qualitative"][q] for r in rs])
  return rows


# The diagnostics the table knows, in its order, with their column headings; diagnostic_columns()
# adds every other number the rows carry but NOT_DIAGNOSTICS (and the NOT_DIAGNOSTIC_PREFIXES).
DIAGNOSTICS = (("overlap", "overlap"), ("ortho_cos", "ortho cos"),
               ("mean_abs_log_z_none", "|log Z| none"), ("mean_abs_log_z_one", "|log Z| one"),
               ("mean_abs_log_z_both", "|log Z| both"), ("mean_tail_boost", "tail boost"),
               ("mean_unranked_mass", "unranked mass"), ("unranked_pick_frac", "unranked picks"),
               ("mean_entropy_b", "H(p_b)"), ("mean_entropy_experts", "H(p_i)"))
# Numbers the rows carry that are not this table's: the seed; how many strings have every source
# (behind exact_match_all_sources); the flags (overlap and ortho_cos against their tolerances:
# the table shows the numbers) and parallel_defined (whether exact_match_parallel is); the pooled
# |log Z| (the background table's) and the maxima beside the means shown; ortho (ortho_cos is its
# scale-free form); the experts' and background's total variation and active fractions (what
# overlap summarises).
NOT_DIAGNOSTICS = ("seed", "num_all_sources", "flag_overlap", "flag_ortho", "parallel_defined",
                   "mean_abs_log_z", "max_abs_log_z", "max_tail_boost", "max_unranked_mass",
                   "ortho", "tv_mask", "tv_background", "active_frac")
# exact matches (the EM column and tables) and the violations' outcome fractions, one per
# expert or role
NOT_DIAGNOSTIC_PREFIXES = ("exact_match", "outcome_")


def _diagnosed(runs: dict) -> list[dict]:
  return [r for run in runs.values() for exp in ("substitution", "violations")
          for r in run.get(exp, [])]


def diagnostic_columns(runs: dict) -> list[tuple[str, str]]:
  """(key, heading) of the diagnostics table's columns: DIAGNOSTICS, then every other field of
  the substitution and violations rows that is a number (or a list of them), under its name."""
  rows = _diagnosed(runs)
  numbers = fields.present(rows, lambda k: not k.startswith(NOT_DIAGNOSTIC_PREFIXES) and all(
      isinstance(r[k], int | float | list) for r in rows if k in r))
  headings = dict(DIAGNOSTICS)
  return [(k, headings.get(k, k)) for k in fields.ordered([*headings, *numbers], headings,
                                                           NOT_DIAGNOSTICS)]


def diagnostic_rows(runs: dict) -> list[list]:
  """Seed means of the diagnostics (diagnostic_columns): each substitution pair and each
  violations case."""
  columns = [k for k, _ in diagnostic_columns(runs)]
  rows = []
  for name, run in runs.items():
    groups = defaultdict(list)
    for r in run.get("substitution", []):
      groups[f"pair {r['pair']}"].append(r)
    for r in run.get("violations", []):
      groups[f"{r['case']} {r['experts']}"].append(r)
    for key, rs in groups.items():
      em = [number(r.get("exact_match", r.get("exact_match_parallel"))) for r in rs]
      rows.append([name, key, float(np.mean(em))] + [
          f"{np.mean([number(r.get(k, 'nan')) for r in rs]):.3g}" for k in columns])
  return rows


def _seeds(em: list[float]) -> list:
  """Mean, worst seed and every seed's value of one cell."""
  return [float(np.mean(em)), float(np.min(em)), ", ".join(f"{v:.3f}" for v in em)]


def baseline_rows(runs: dict) -> list[list]:
  """Per run, pair and method, the exact match of each seed: the composition beside the model
  trained jointly on both substitutions, weight averaging, task arithmetic (lambda 0.5, 1), each
  expert alone and the background alone (letters/experiments.py's baselines)."""
  rows = []
  for name, run in runs.items():
    groups = defaultdict(list)
    for r in run.get("baselines", []):
      groups[(r["pair"], r["method"])].append(number(r["exact_match"]))
    rows += [[name, pair, method, *_seeds(em)] for (pair, method), em in groups.items()]
  return rows


def background_rows(runs: dict) -> list[list]:
  """Per run, pair and background of the composition: exact match per seed, and the seed means
  of |log Z_t| and of the both-active fraction."""
  rows = []
  for name, run in runs.items():
    groups = defaultdict(list)
    for r in run.get("background", []):
      groups[(r["pair"], r["background"])].append(r)
    for (pair, bg), rs in groups.items():
      rows.append([name, pair, bg, *_seeds([number(r["exact_match"]) for r in rs]),
                   f"{np.mean([number(r['mean_abs_log_z']) for r in rs]):.3g}",
                   f"{np.mean([number(r['overlap']) for r in rs]):.3g}"])
  return rows


def k_expert_rows(runs: dict) -> list[list]:
  """Per run and k (experts A>B, C>D, ... composed over one background): exact match per seed,
  the seed means of |log Z_t|, of the composed p(EOS) where the reference ends, and of its
  largest value anywhere else (on the reference's prefix)."""
  rows = []
  for name, run in runs.items():
    groups = defaultdict(list)
    for r in run.get("k_experts", []):
      groups[r["k"]].append(r)
    for k, rs in sorted(groups.items()):
      rows.append([name, k, *_seeds([number(r["exact_match"]) for r in rs]),
                   f"{np.mean([number(r['mean_abs_log_z']) for r in rs]):.3g}",
                   *[f"{np.mean([number(r[k]) for r in rs]):.3g}" for k in (
                       "p_eos_at_eos", "max_p_eos_elsewhere")]])
  return rows


def k_baseline_rows(runs: dict) -> list[list]:
  """Per run, k and method (letters/experiments.py's k_baselines), the exact match of each seed,
  the composition of the same k experts (k_experts' rows) first."""
  rows = []
  for name, run in runs.items():
    groups = defaultdict(list)
    for r in run.get("k_experts", []):
      groups[(r["k"], "composition")].append(number(r["exact_match"]))
    for r in run.get("k_baselines", []):
      groups[(r["k"], r["method"])].append(number(r["exact_match"]))
    if run.get("k_baselines"):
      rows += [[name, k, method, *_seeds(em)] for (k, method), em in sorted(
          groups.items(), key=lambda kv: kv[0][0])]
  return rows


def arithmetic_rows(runs: dict) -> list[list]:
  """Per run and fine-tuned regime: how far task arithmetic's next-token distribution is from
  the composition's (max total variation over steps and seeds), and both exact matches."""
  rows = []
  for name, run in runs.items():
    groups = defaultdict(list)
    for r in run.get("arithmetic", []):
      groups[r["regime"]].append(r)
    for regime, rs in groups.items():
      rows.append([name, regime, f"{max(number(r['max_tv']) for r in rs):.2g}",
                   *[f"{np.mean([number(r[k]) for r in rs]):.3f}" for k in (
                       "exact_match_task_arithmetic", "exact_match_composition",
                       "exact_match_expert1_own", "exact_match_expert2_own")]])
  return rows


def mean_over(em: dict, model: str, lo: int, hi: int) -> float:
  vals = [v for (m, n), vs in em.items() if m == model and lo <= n <= hi for v in vs]
  return float(np.mean(vals)) if vals else float("nan")


def length_rows(runs: dict) -> list[list]:
  """Exact match at lengths 1-4 and over 5-16 / 17-32, then the letters alone at 1-4."""
  rows = []
  for name, run in runs.items():
    em, letters = defaultdict(list), defaultdict(list)
    for r in run.get("length", []):
      em[(r["model"], int(r["length"]))].append(number(r["exact_match"]))
      letters[(r["model"], int(r["length"]))].append(number(r.get("letters_match", "nan")))
    for model in dict.fromkeys(m for m, _ in em):
      rows.append([name, model] + [mean_over(em, model, n, n) for n in (1, 2, 3, 4)] + [
          mean_over(em, model, 5, 16), mean_over(em, model, 17, 32)] + [
          mean_over(letters, model, n, n) for n in (1, 2, 3, 4)])
  return rows
