"""Accuracy with bootstrap intervals, and paired comparisons of an llm workdir's systems, over
problems and expert seeds (issue 38, items 4 and 6).

Per-problem rows: WORKDIR/<benchmark>/<system>.jsonl are seed 0's; a workdir that scored other
seeds' experts (the llm_study pipeline's score stages) holds each in WORKDIR/seed_<s>/, an llm
workdir of its own. A system with no expert (the background alone) is scored at seed 0 only:
the experts are fine-tuned from that one background, so it is the same model at every seed, and
its seed-0 rows stand for every seed (`paired` broadcasts them). Every row `read` returns says
its seed.

Interval: 95% percentile interval (analysis.correlations' LEVEL) of BOOTSTRAP_DRAWS resamples
from a fixed generator seed (a report regenerates byte for byte) that draw the seeds and the
problems independently, each with replacement, and weigh every (seed, problem) outcome by the
product of the two counts. Every seed scores the same problems (crossed, not nested), so a
problem is drawn with all its seeds' outcomes and a seed with all its problems. Not the
problems alone with each problem's seed mean: that holds the seeds fixed, and the interval
would not cover another fine-tuning seed, which is the question (does the result hold for
experts trained again?). With 3 seeds the seed draws are coarse (10 distinct multisets), so the
interval is wider than a problems-only one, not narrower; and resampling both factors counts
their interaction twice, so it is conservative: with no true difference and seeds that do not
differ, 3 seeds x 40 problems covered 0 in 298 of 300 simulated draws (1 seed: 285 of 300,
the nominal 95%). With one seed: problems alone.
A comparison resamples the paired differences A - B on the same problems and seeds. The draws
pick positions in the problems' order by id (sorted as text), so a result depends on which
problems were scored, never on the order of their rows.

The majority answer (added 2026-12-07, after the quick preset's arith expert led the
background by no more than bare small numbers score): on a benchmark whose rows carry the gold
answer (arith's number, strings' text; not code, scored by tests), each problem answered with
the gold most frequent among the *other* scored problems (ties: the first as text), so no
problem's own gold picks its answer: the majority-class baseline, cross-validated
(leave-one-out) on the scored problems. An expert that does not lead it has not shown its skill
beyond guessing the answers' distribution.

The trivial baselines (llm_eval/baselines.py; issue 55), scored as systems of kind "baseline"
at seed 0 (deterministic, so their rows stand for every seed, as the background's): each expert
is judged against the strongest of them on its own benchmark, the one of the highest accuracy
in the summary (ties: the first scored), besides the background.
"""

import os
import re
from collections import Counter
from typing import NamedTuple

import numpy as np

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import correlations
from compgen_jax.types import DataError

SEED_DIR = "seed_{}"  # WORKDIR/seed_<s>/: seed s's experts scored (seed 0: WORKDIR itself)
LEADS, TRAILS, NOT_TOLD_APART = "leads", "trails", "not told apart"
RULE = (f"A comparison A - B (accuracy, percentage points, on the same problems and seeds) "
        f"**{LEADS}** when its 95% interval's lower end is above 0, **{TRAILS}** when its upper "
        f"end is below 0, else **{NOT_TOLD_APART}**.")
# An expert's own skill: the benchmark of its name (the study names each expert after its
# skill), or the paper's (its math expert on GSM8K and MATH, its coding expert on the two code
# benchmarks).
SKILL_BENCHMARKS = {"math": ("gsm8k", "math"), "coding": ("humaneval_plus", "mbpp_plus")}
MERGES = ("task_arithmetic", "weight_average")
JOINT = "joint"  # the study's model fine-tuned on the merged experts' skills at once
MAJORITY = "majority answer"  # the leave-one-out majority answer (module doc), as a system
BASELINE = "baseline"  # a trivial baseline's kind in the summary rows
STRONGEST = "expert against the strongest trivial baseline, own skill"


def seed_dir(workdir: str, seed: int) -> str:
  return workdir if seed == 0 else os.path.join(workdir, SEED_DIR.format(seed))


def seeds_of(workdir: str) -> list[int]:
  """0 and every s whose WORKDIR/seed_<s>/ has its summary written (scored), in order."""
  found = [int(m.group(1)) for name in (os.listdir(workdir) if os.path.isdir(workdir) else [])
           if (m := re.fullmatch(SEED_DIR.format(r"(\d+)"), name))
           and os.path.isfile(os.path.join(workdir, name, workdir_lib.SUMMARY_FILE))]
  return [0, *sorted(s for s in found if s > 0)]


def read(workdir: str) -> list[dict]:
  """A row per (benchmark, system, seed, problem): its `correct`, for every (benchmark,
  system) of each seed's summary; DataError when a summary names rows that are not there."""
  out = []
  for seed in seeds_of(workdir):
    where = seed_dir(workdir, seed)
    for r in metric_writer.read_rows(os.path.join(where, workdir_lib.SUMMARY_FILE)):
      path = os.path.join(where, r["benchmark"], f"{r['system']}.jsonl")
      rows = metric_writer.read_rows(path)
      if len(rows) != r["num_problems"]:
        raise DataError(f"{path}: {len(rows)} per-problem rows, its summary says "
                        f"{r['num_problems']} (score the workdir again to finish it)")
      out += [{"benchmark": r["benchmark"], "system": r["system"], "seed": seed,
               "id": str(p["id"]), "correct": bool(p["correct"]),
               **({"gold": str(p["gold"])} if p.get("gold") is not None else {})}
              for p in rows]
  return out


def majority_answer(problems: list[dict], benchmark: str) -> "Scores | None":
  """The leave-one-out majority answer's outcomes [1 seed, problems] on `benchmark` (module
  doc), or None when a row of it has no gold; DataError when two rows give one problem
  different golds."""
  golds: dict[str, str] = {}
  for r in problems:
    if r["benchmark"] != benchmark:
      continue
    if "gold" not in r:
      return None
    if golds.setdefault(r["id"], r["gold"]) != r["gold"]:
      raise DataError(f"{benchmark}: problem {r['id']!r} has golds {golds[r['id']]!r} and "
                      f"{r['gold']!r}")
  if not golds:
    return None
  counts = Counter(golds.values())

  def guess(own: str) -> str:  # the mode of the other problems' golds
    others = lambda a: counts[a] - (a == own)  # noqa: E731
    return min(counts, key=lambda a: (-others(a), a))

  ids = tuple(sorted(golds))
  return Scores((0,), ids, np.asarray([[golds[i] == guess(golds[i]) for i in ids]], np.float64))


class Scores(NamedTuple):
  seeds: tuple[int, ...]
  ids: tuple[str, ...]  # sorted: the result does not depend on the rows' order
  correct_SxP: np.ndarray


def scores(rows: list[dict], verb: str = "scored") -> dict[tuple[str, str], Scores]:
  """{(benchmark, system): its outcomes [seeds, problems]} of every scored pair, in the rows'
  order, grouped in one pass; DataError when a problem repeats or a pair's seeds scored
  different problems (the crossed design; `verb` says what the rows record in its message)."""
  by_pair: dict[tuple[str, str], dict[int, dict[str, bool]]] = {}
  for r in rows:
    seen = by_pair.setdefault((r["benchmark"], r["system"]), {}).setdefault(r["seed"], {})
    if r["id"] in seen:
      raise DataError(f"{r['benchmark']}/{r['system']}: problem {r['id']!r} {verb} twice at "
                      f"seed {r['seed']}")
    seen[r["id"]] = r["correct"]
  out = {}
  for (bench, system), by_seed in by_pair.items():
    seeds = tuple(sorted(by_seed))
    ids = tuple(sorted(by_seed[seeds[0]]))
    for s in seeds[1:]:
      if tuple(sorted(by_seed[s])) != ids:
        raise DataError(f"{bench}/{system}: seed {s} {verb} other problems than seed "
                        f"{seeds[0]}")
    out[bench, system] = Scores(seeds, ids, np.asarray(
        [[by_seed[s][i] for i in ids] for s in seeds], np.float64))
  return out


def paired(a: Scores, b: Scores, what: str) -> tuple[np.ndarray, np.ndarray]:
  """a's and b's outcomes [seeds, problems] on the same problems and seeds (one scored at seed
  0 alone, the background, stands for every seed of the other); DataError when unpaired."""
  if a.ids != b.ids:
    only_a = sorted(set(a.ids) - set(b.ids))
    only_b = sorted(set(b.ids) - set(a.ids))
    raise DataError(f"{what}: unpaired problems ({len(only_a)} scored by the first only, e.g. "
                    f"{only_a[:3]}; {len(only_b)} by the second only, e.g. {only_b[:3]}): a "
                    "paired comparison needs the same problems")
  x, y = a.correct_SxP, b.correct_SxP
  if a.seeds == b.seeds:
    return x, y
  if b.seeds == (0,):
    return x, np.broadcast_to(y, x.shape)
  if a.seeds == (0,):
    return np.broadcast_to(x, y.shape), y
  raise DataError(f"{what}: seeds {list(a.seeds)} against {list(b.seeds)}: a paired "
                  "comparison needs the same seeds (or one scored once, at seed 0)")


class Interval(NamedTuple):
  value: float  # the mean over every (seed, problem)
  low: float
  high: float
  seeds: int
  problems: int


def interval(x_SxP) -> Interval:
  """The mean of x [seeds, problems] with the crossed bootstrap's interval (module doc)."""
  x = np.asarray(x_SxP, np.float64)
  if x.ndim != 2 or 0 in x.shape:
    raise ValueError(f"need outcomes [seeds, problems], got shape {x.shape}")
  num_s, num_p = x.shape
  rng = np.random.default_rng(correlations.BOOTSTRAP_SEED)
  w_seed = correlations.resample_counts(num_s, rng).astype(np.float64)  # [draws, seeds]
  w_prob = correlations.resample_counts(num_p, rng).astype(np.float64)  # [draws, problems]
  draws = np.einsum("ds,sp,dp->d", w_seed, x, w_prob) / (num_s * num_p)
  low, high = correlations.percentile_interval(draws)
  return Interval(float(x.mean()), low, high, num_s, num_p)


def verdict(d: Interval) -> str:
  """RULE's word for a difference's interval."""
  return LEADS if d.low > 0 else TRAILS if d.high < 0 else NOT_TOLD_APART


class Comparison(NamedTuple):
  question: str
  benchmark: str
  system: str
  other: str


def skill_benchmarks(model: str) -> tuple[str, ...]:
  return SKILL_BENCHMARKS.get(model, (model,))


def strongest_baseline(summary: list[dict], benchmark: str) -> str | None:
  """The trivial baseline of the highest accuracy on `benchmark` (the first scored on ties), or
  None when none is scored there."""
  best = None
  for r in summary:
    if r["benchmark"] == benchmark and r["kind"] == BASELINE and (
        best is None or r["accuracy"] > best["accuracy"]):
      best = r
  return None if best is None else best["system"]


def comparisons(summary: list[dict]) -> list[Comparison]:
  """The comparisons the study asks for, from the summary rows' kinds and members: each expert
  (a single model that a composition has as a member) against the background on its own skill;
  each composition against each of its members on that member's skill; each composition against
  the merges of the same experts and the joint model, on every benchmark."""
  benches = list(dict.fromkeys(r["benchmark"] for r in summary))
  systems = {r["system"]: r for r in summary}
  composed = [r for r in systems.values() if r["kind"] == "composed"]
  if not composed:
    return []
  background = composed[0]["members"][0]
  experts = [m for m in dict.fromkeys(m for c in composed for m in c["members"][1:])
             if m in systems and systems[m]["kind"] == "single"]
  own = lambda e: [b for b in benches if b in skill_benchmarks(e)]  # noqa: E731
  out = [Comparison("expert against the background, own skill", b, e, background)
         for e in experts if background in systems for b in own(e)]
  out += [Comparison("expert against the majority answer, own skill", b, e, MAJORITY)
          for e in experts for b in own(e)]
  out += [Comparison(STRONGEST, b, e, best) for e in experts for b in own(e)
          if (best := strongest_baseline(summary, b)) is not None]
  for c in composed:
    out += [Comparison("composition against its member, the member's skill", b, c["system"], e)
            for e in c["members"][1:] if e in systems for b in own(e)]
  for c in composed:
    mine = set(c["members"][1:])
    merges = [r["system"] for r in systems.values()
              if r["kind"] in MERGES and set(r["members"]) - {background} == mine]
    baselines = merges + ([JOINT] if merges and JOINT in systems else [])
    out += [Comparison("composition against a merge or the joint model", b, c["system"], o)
            for o in baselines for b in benches]
  return out


def cells(problems: list[dict]) -> dict[tuple[str, str], Interval]:
  """{(benchmark, system): accuracy with its interval} of every scored pair."""
  return {key: interval(sc.correct_SxP) for key, sc in scores(problems).items()}


def compare(summary: list[dict], problems: list[dict]) -> list[dict]:
  """A row per comparison: both systems' accuracy, the paired difference, its interval and
  verdict (every value a fraction)."""
  out, by_pair = [], scores(problems)
  for c in comparisons(summary):
    b = (majority_answer(problems, c.benchmark) if c.other == MAJORITY  # golds needed
         else by_pair.get((c.benchmark, c.other)))
    a = by_pair.get((c.benchmark, c.system))
    if a is None or b is None:
      continue
    x, y = paired(a, b, f"{c.benchmark}: {c.system} against {c.other}")
    d = interval(x - y)
    out.append({**c._asdict(), "accuracy": float(x.mean()), "other_accuracy": float(y.mean()),
                "difference": d.value, "low": d.low, "high": d.high, "seeds": d.seeds,
                "problems": d.problems, "verdict": verdict(d)})
  return out

