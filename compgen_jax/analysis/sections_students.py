"""Report section comparing students (transformer vs MLP) at matched parameter counts over the
number of training tasks. Parameter counts come from each workdir's params.json (training writes
it)."""

import functools
import json
import math
import os

from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import aggregate, figures, paper, readings, sections_data, verdicts
from compgen_jax.analysis import claims as claims_table
from compgen_jax.analysis import markdown as md
from compgen_jax.analysis.aggregate import Metric
from compgen_jax.analysis.verdicts import n_seeds
from compgen_jax.types import DataError

MATCHED = 0.05  # parameter counts within this relative difference count as matched


@functools.lru_cache(maxsize=256)
def num_params(workdir: str) -> int:
  """Parameters of the student a workdir trains (its params.json)."""
  path = os.path.join(workdir, workdir_lib.PARAMS_FILE)
  try:
    with open(path) as f:
      return int(json.load(f)["student"])
  except FileNotFoundError:
    raise DataError(f"{path}: missing (training writes it; experiments/train.py rerun with the "
                    f"workdir's config writes it for a finished run, training nothing)") from None
  except (ValueError, KeyError, TypeError) as e:
    raise DataError(f"{path}: not a parameter count ({e})") from None


def _pairs(programs: dict[str, tuple[str, int]]) -> list[tuple[str, str, float]]:
  """Each transformer program with the MLP program closest in parameters: (tf, mlp, rel diff)."""
  mlps = [p for p, (s, _) in programs.items() if s == "mlp"]
  out = []
  for p, (student, n) in programs.items():
    if student == "transformer" and mlps:
      m = min(mlps, key=lambda q: abs(programs[q][1] - n))
      out.append((p, m, abs(programs[m][1] - n) / n))
  return out


def transformer_vs_mlp(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str):
  """OOD performance against n_train per student, with the computed comparisons."""
  programs = {r["program"]: (r.get("student.name"), num_params(r["workdir"])) for r in rows}
  parts = [md.claim(paper.CLAIMS["transformer_vs_mlp"]),
           md.rules(verdicts.RULES["seeds"], verdicts.RULES["lower"] + " (here: the MLP "
                    "clearly lower than the transformer at one number of training tasks)",
                    verdicts.RULES["paired"],
                    f"tasks needed: the number of training tasks at which OOD / ID reaches "
                    f"{sections_data.TARGET_OF_ID} (fixed before the data; interpolated in log "
                    f"n_train), per seed; fewer: the log tasks needed clearly lower, or "
                    f"reached by every seed of the transformer and none of the MLP",
                    verdicts.RULES["holm"], verdicts.RULES["fits"]), ""]
  claims = []
  pairs = _pairs(programs)
  if pairs:
    worst = max(d for _, _, d in pairs)
    parts.append(md.check(f"parameter counts matched within {MATCHED:.0%}", worst <= MATCHED,
                          "; ".join(f"{programs[t][1]:,} vs {programs[m][1]:,} ({d:.1%})"
                                    for t, m, d in pairs)))
  for metric in metrics:
    fname = f"transformer_vs_mlp_{metric.slug}.png"
    parts.append(md.fits_check(rows, metric, verdicts.FITS_ID))
    curves = aggregate.curves_by(rows, metric.key, ("program",))
    ids = aggregate.curves_by(rows, metric.id_key, ("program",))
    for tf, mlp, _ in pairs:
      oks = _compare(curves[(tf,)], curves[(mlp,)], metric)
      word = verdicts.overall(oks)
      parts.append(md.verdict(f"{metric.label}: transformer clearly above the MLP at every "
                              f"number of training tasks ({programs[tf][1]:,} parameters)",
                              word, f"{verdicts.count(oks)} numbers of training tasks"))
      seeds = min(curves[(tf,)].seeds, curves[(mlp,)].seeds)
      claims.append(claims_table.claim(
          f"{metric.label}: the transformer is more data-efficient than the MLP at matched "
          f"parameters ({programs[tf][1]:,} vs {programs[mlp][1]:,})", "transformer higher",
          f"{verdicts.count(oks)} numbers of training tasks ({n_seeds(seeds)})", seeds, word,
          fname, composition=_gap_text(rows, tf, mlp, metric),
          against_paper=readings.paper_direction(word), rules=("transformer",)))
    ratio_rows = sections_data.with_ratio(rows, metric)
    needed = sections_data.tasks_needed(ratio_rows, ("program",))
    parts.append(f"- training tasks needed for {metric.label} >= "
                 f"{sections_data.TARGET_OF_ID} x ID (seed means): " + "; ".join(
                     f"{p}: " + _needed_text(c) for (p,), c in needed.items()))
    per_seed = sections_data.per_seed_needed(ratio_rows, ("program",))
    for tf, mlp, _ in pairs:
      judgement = sections_data.fewer_needed(per_seed[(tf,)], per_seed[(mlp,)])
      word = verdicts.word(judgement.ok)
      seeds = min(len(per_seed[(tf,)]), len(per_seed[(mlp,)]))
      ours = (f"tasks needed per seed: transformer "
              f"{', '.join(_needed_text(c) for c in per_seed[(tf,)])}; MLP "
              f"{', '.join(_needed_text(c) for c in per_seed[(mlp,)])} ({judgement.detail})")
      parts.append(md.verdict(f"the transformer needs clearly fewer training tasks than the "
                              f"MLP to reach {metric.label} >= {sections_data.TARGET_OF_ID} x "
                              f"ID ({programs[tf][1]:,} parameters)", word, ours))
      claims.append(claims_table.claim(
          f"the transformer needs fewer training tasks than the MLP to reach {metric.label} / "
          f"ID >= {sections_data.TARGET_OF_ID} ({programs[tf][1]:,} vs {programs[mlp][1]:,} "
          f"parameters)", "fewer tasks needed", f"{ours} ({n_seeds(seeds)})", seeds, word,
          fname, readings.fits_note(rows, metric.id_key),
          composition=f"tasks needed by OOD / ID (the gap, not the fit); "
          f"{_gap_text(rows, tf, mlp, metric)}",
          against_paper=readings.paper_direction(word), rules=("transformer",)))
    seeds = min((c.seeds for c in curves.values()), default=0)
    series = [sections_data.series(f"{programs[p][0]} ({programs[p][1]:,} params)", c,
                                   ids.get((p,))) for (p,), c in curves.items()]
    path = figures.curves_png([("", series)], os.path.join(out_dir, fname),
                              "number of training tasks", metric.label, chance=metric.chance,
                              title=figures.caption(seeds))
    parts.append(md.figure(os.path.basename(path), f"{metric.label} vs training tasks",
                           f"{metric.label} (solid) and ID (dashed); {figures.caption(seeds)}."))
  first = aggregate.group(rows, ("program", "n_train"), metrics[0].key)
  body = [[g.key[0], programs[g.key[0]][0], f"{programs[g.key[0]][1]:,}", g.key[1],
           *(c for m in metrics for c in md.cells(g.rows, m)), g.n] for g in first]
  parts.append("\n" + md.table(["program", "student", "parameters", "n_train",
                                *(h for m in metrics for h in md.cell_header(m)), "seeds"], body))
  return "\n".join(parts), claims


def _needed_text(c: aggregate.Crossing) -> str:
  return "not reached" if not math.isfinite(c.x) else f"{'<= ' if c.bound else ''}{c.x:.1f}"


def _compare(tf: aggregate.Curve, mlp: aggregate.Curve, metric: Metric) -> list:
  """Per shared number of training tasks: is the MLP clearly lower than the transformer."""
  tf_groups = dict(zip(tf.x, tf.groups, strict=True))
  # Same seeds, same task and split: paired by seed (verdicts.RULES["paired"]).
  return [verdicts.lower(aggregate.by_seed(g.rows, metric.key),
                         aggregate.by_seed(tf_groups[n].rows, metric.key))
          for n, g in zip(mlp.x, mlp.groups, strict=True) if n in tf_groups]


def _gap_text(rows: list[dict], tf: str, mlp: str, metric: Metric) -> str:
  """Each student's OOD against its ID over all its runs."""
  return "; ".join(f"{name}: " + readings.composition([r for r in rows if r["program"] == p],
                                                      metric)
                   for name, p in (("transformer", tf), ("MLP", mlp)))
