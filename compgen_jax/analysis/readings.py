"""The two readings every claims row carries, and the rules that keep fit apart from composition:
whether the students fit (ID), the architectures that fit, OOD against ID (the gap), our interval
against the paper's value (and why it misses: fit, or a gap at this scale), the trend
rule (a rise along a scale axis is composition only if OOD / ID rises too, or every run fits),
the equivalence margin, and when a comparison is not testable here."""

import math
from typing import NamedTuple

import numpy as np
from scipy import stats

from compgen_jax.analysis import aggregate, verdicts
from compgen_jax.analysis import markdown as md

# A comparison "A hurts (vs baseline)" is testable only when the baseline generalizes: its seed
# mean OOD / ID at least this (the scaling law's relative target); two failures say nothing.
BASELINE_OF_ID = 0.9
# "Does not hurt" is within this fraction of the smallest hurt these runs show (RULES['margin']).
EQUIVALENCE_FRACTION = 0.2
# The phrases of the paper reading the claims table's summary counts by (one place).
REACHES, AGREES, CONTRADICTS = "reaches it", "ours agrees", "ours contradicts it"
HOLDS = "not told apart from it"  # the interval holds the paper's value: neither reached nor short
AGREEMENT = (REACHES, AGREES)
NOT_TESTABLE_YET = "not testable here yet"
ARCHITECTURE = ("student.name", "student.mlp.width", "student.mlp.depth")


def fits(rows: list[dict], id_key: str) -> tuple[int, int]:
  """(runs whose ID metric is at least FITS_ID, runs with an ID metric)."""
  values = verdicts.finite(r.get(id_key) for r in rows)
  return int(np.sum(values >= verdicts.FITS_ID)), int(values.size)


def fits_note(rows: list[dict], id_key: str) -> str:
  """'ID >= 0.9 in 40 of 60 runs' for a claim's note."""
  ok, n = fits(rows, id_key)
  return f"{id_key} >= {verdicts.FITS_ID} in {ok} of {n} runs" if n else f"no {id_key} in the rows"


def fitted_architectures(rows: list[dict], id_key: str) -> dict:
  """{architecture: rows} of the architectures (student, width, depth) every one of whose runs
  fits its training tasks (ID >= FITS_ID): inside one, OOD differences are not differences of
  fit."""
  out = {}
  for g in aggregate.group(rows, ARCHITECTURE, id_key):
    ok, n = fits(g.rows, id_key)
    if n and ok == n:
      out[g.key] = g.rows
  return out


def architecture_label(key: tuple) -> str:
  student, width, depth = key
  return f"{student or 'mlp'} {depth or '?'}x{width or '?'}"


def composition(rows: list[dict], metric) -> str:
  """OOD against ID over the runs: the mean gap ID - OOD with its 95% t-interval over runs,
  and how many runs fit (a gap is composition only where ID fits)."""
  gap = verdicts.mean_interval(aggregate.gaps(rows, metric))
  ids = aggregate.summarize(aggregate.values(rows, metric.id_key))
  ood = aggregate.summarize(aggregate.values(rows, metric.key))
  ok, n = fits(rows, metric.id_key)
  return (f"ID {md.mean_sd(*ids[:2])}, OOD {md.mean_sd(*ood[:2])}, gap ID - OOD "
          + (gap.text() if gap else "-") + f" over {ids[2]} runs; ID >= {verdicts.FITS_ID} in "
          f"{ok} of {n}")


def against_value(ood_values, id_values, paper: float,
                  bounds: tuple[float, float] = (-math.inf, 1.0)) -> str:
  """Does our seed mean reach the paper's value: its 95% t-interval (held inside the metric's
  `bounds`) *reaches it* only when its lower end does (RULES['reaches']); an interval that
  holds it is not told apart from it; short of it, why: the shortfall split into fit (paper -
  ID: the students do not even fit that well) and the gap (ID - OOD: composition at CPU
  scale, a real difference only if it stays at the paper's scale), the larger one named."""
  m = verdicts.clipped(verdicts.mean_interval(ood_values), bounds)
  if m is None:
    return f"paper {paper:.2f}; not judged (one seed)"
  head = f"paper {paper:.2f}, ours {m.estimate:.3f} [{m.low:.3f}, {m.high:.3f}]: "
  if m.low >= paper:
    return head + REACHES + " (the interval's lower end at or above it)"
  if m.high >= paper:
    return head + f"{HOLDS}: the interval holds it, its lower end {m.low:.3f} below it"
  i = verdicts.clipped(verdicts.mean_interval(id_values), bounds)
  short = paper - m.estimate
  if i is None:
    return head + f"short by {short:.3f} (no ID to tell fit from the gap)"
  fit, gap = max(paper - i.estimate, 0.0), i.estimate - m.estimate
  main = ("mostly fit" if fit >= gap else
          "mostly the gap: composition at CPU scale (a real difference only if it stays at the "
          "paper's scale)")
  return head + (f"short by {short:.3f}, {fit:.3f} of it fit (ID {i.estimate:.3f} [{i.low:.3f}, "
                 f"{i.high:.3f}] vs the paper's {paper:.2f}) and {gap:.3f} the gap ID - OOD: "
                 f"{main}")


class Trend(NamedTuple):
  judgement: verdicts.Judgement  # the trend rule's (RULES['trend'])
  ood: verdicts.Judgement  # the rising rule on OOD alone


def trend(groups: list[list[dict]], metric) -> Trend:
  """A rise along a scale axis (the runs at each point, in order) read against fit
  (RULES['trend']): OOD rises by the rising rule and, unless every run fits (ID >= FITS_ID),
  so does OOD / ID; a rise of OOD alone where fit moves is fit, not composition."""
  ood = verdicts.rises([aggregate.by_seed(g, metric.key) for g in groups])
  ok, n = fits([r for g in groups for r in g], metric.id_key)
  if n and ok == n:
    return Trend(verdicts.Judgement(ood.ok, f"{ood.detail}; every run fits: OOD alone", ood.p),
                 ood)
  ratio = verdicts.rises([_ratio(g, metric) for g in groups])
  detail = f"OOD: {ood.detail}; OOD / ID: {ratio.detail}"
  if ood.ok is not True:
    return Trend(verdicts.Judgement(ood.ok, detail, ood.p), ood)
  fit = "; OOD rises, OOD / ID does not: the rise is fit" if ratio.ok is False else ""
  return Trend(verdicts.Judgement(ratio.ok, detail + fit, max(ood.p, ratio.p)), ood)


def _ratio(rows: list[dict], metric) -> dict | list:
  """OOD / ID per seed ({seed: value} where seeds pair, NaN where ID is not positive)."""
  ood, ids = (aggregate.by_seed(rows, k) for k in (metric.key, metric.id_key))
  if isinstance(ood, dict) and isinstance(ids, dict):
    return {s: ood[s] / ids[s] if ids[s] > 0 else math.nan for s in ood}
  return [o / i if i > 0 else math.nan for o, i in zip(aggregate.values(rows, metric.key),
                                                       aggregate.values(rows, metric.id_key),
                                                       strict=True)]


def trend_verdict(trends: list[Trend]) -> tuple[str, str]:
  """(verdict, what it counts) of a claim over trends: 'k of n yes; OOD alone m of n yes',
  led by 'not shown: fit at j of n' where OOD rises and OOD / ID does not."""
  word = verdicts.overall([t.judgement for t in trends])
  counts = (f"{verdicts.count([t.judgement for t in trends])}; OOD alone "
            f"{verdicts.count([t.ood for t in trends])}")
  fit = sum(t.ood.ok is True and t.judgement.ok is False for t in trends)
  if fit:
    counts = (f"{word}: fit at {fit} of {len(trends)} (OOD rises, OOD / ID does not); "
              + counts)
  return word, counts


def baseline_generalizes(rows: list[dict], metric) -> tuple[bool, str]:
  """(the baseline's seed-mean OOD / ID >= BASELINE_OF_ID, its text); rows without an ID metric
  are taken to fit (ID 1)."""
  ood = aggregate.summarize(aggregate.values(rows, metric.key))[0]
  ids = aggregate.summarize(aggregate.values(rows, metric.id_key))[0]
  ids = 1.0 if math.isnan(ids) else ids
  ratio = ood / ids if ids > 0 else math.nan
  return bool(ratio >= BASELINE_OF_ID), f"baseline OOD / ID {ratio:.2f}"


def seed_sd(baselines: list[list]) -> float:
  """The baselines' own seed-to-seed s.d., pooled over the settings compared."""
  xs = [verdicts.finite(b) for b in baselines]
  dof = sum(x.size - 1 for x in xs if x.size > 1)
  ss = sum(float(((x - x.mean()) ** 2).sum()) for x in xs if x.size > 1)
  return math.sqrt(ss / dof) if dof else math.nan


def equivalence_margin(hurts: list[float]) -> float:
  """The margin of 'does not hurt' (RULES['margin']): EQUIVALENCE_FRACTION of the smallest
  shortfall below the baseline (seed means) among the comparisons the paper calls a hurt that
  these runs show; NaN when none is shown (no hurt measured here to size it)."""
  return EQUIVALENCE_FRACTION * min(hurts) if hurts else math.nan


def passable(margin: float, sd: float, seeds: int) -> bool:
  """Whether an outcome could pass `margin`: with no shortfall at all and the baseline's seed
  s.d. in both settings, the interval's half-width t_(n-1) sd sqrt(2 / n) lies below it."""
  if not (math.isfinite(margin) and math.isfinite(sd)) or seeds < verdicts.MIN_SEEDS:
    return False
  return bool(stats.t.ppf(0.5 + verdicts.LEVEL / 2, seeds - 1) * sd * math.sqrt(2 / seeds)
              < margin)


def paper_direction(word: str, contradicts: bool = False) -> str:
  """The paper states a direction, no value: whether ours agrees (or clearly shows the
  opposite: `contradicts`)."""
  if contradicts:
    return f"the paper gives a direction, no value: {CONTRADICTS}"
  return {verdicts.SHOWN: f"the paper gives a direction, no value: {AGREES}",
          verdicts.PARTIAL: "the paper gives a direction, no value: ours agrees in part",
          verdicts.NOT_SHOWN: "the paper gives a direction, no value: ours does not agree",
          verdicts.NOT_JUDGED: "the paper gives a direction, no value: ours too noisy to tell",
          verdicts.NOT_TESTABLE: "the paper gives a direction, no value: not testable here",
          }[word]
