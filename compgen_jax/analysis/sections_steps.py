"""Report section over the length of the training schedule: do a sweep's students underfit by
steps (ID rising with them), and how many steps would their ID metric need to reach
verdicts.FITS_ID at the gain of the last doubling (an extrapolation, labelled as one)? Not a claim
of the paper, which trains far longer than a CPU can (preference: 3M steps); it says how far the
CPU points sit from fitting and which way more steps move them."""

import os

from compgen_jax.analysis import aggregate, figures, sections_model, verdicts
from compgen_jax.analysis import markdown as md
from compgen_jax.analysis.aggregate import Metric
from compgen_jax.analysis.sections_data import MK, series

STEPS = "train.num_steps"
QUESTION = ("**Question (not a claim of the paper):** are these students held back by the "
            "length of their schedule? The paper trains its students far longer than the cpu "
            "presets (hyperteacher 300k steps, preference grid world 3M; the cpu presets 8000). "
            "If they underfit by steps, ID rises with the schedule and OOD follows it; if OOD "
            "does not follow, more steps widen a generalization gap.\n")
EXTRAPOLATION = (f"steps to {verdicts.FITS_ID}: where the seed-mean ID (or OOD) curve would reach "
                 f"{verdicts.FITS_ID} if it kept the gain per doubling of steps of its last two "
                 f"points (linear in log2 steps; an extrapolation, not a measurement; 'never' "
                 f"when the last doubling gained nothing)")
PROBES = (("task decoder R^2", sections_model.TASK_DECODER),
          ("input decoder R^2", sections_model.INPUT_DECODER))


def steps_to_reach(steps: list, mean: list) -> float:
  """The schedule length at which `mean` (ID or OOD, over increasing `steps`) reaches FITS_ID (the
  fit bar, 0.9): measured, or extrapolated at the last doubling's gain
  (aggregate.reach_at_last_gain)."""
  return aggregate.reach_at_last_gain(steps, mean, verdicts.FITS_ID)


def training_steps(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str):
  """ID and OOD against the schedule length: a line per (M, K, n_train), ID dashed; the rises
  verdicts on both, the fit at the longest schedule and the extrapolated steps to fit."""
  by = (*MK, "n_train")
  parts = [QUESTION, md.rules(verdicts.RULES["seeds"], verdicts.RULES["rises"],
                              verdicts.RULES["fits"], EXTRAPOLATION), ""]
  longest = max((r[STEPS] for r in rows if r.get(STEPS) is not None), default=None)
  for metric in metrics:
    ood = aggregate.curves_by(rows, metric.key, by, STEPS)
    ids = aggregate.curves_by(rows, metric.id_key, by, STEPS)
    ups = {name: {k: verdicts.rises([aggregate.values(g.rows, key) for g in c.groups])
                  for k, c in curves.items()}
           for name, key, curves in (("ID", metric.id_key, ids), ("OOD", metric.key, ood))}
    at_longest = [r for r in rows if r.get(STEPS) == longest]
    parts.append(md.fits_check(at_longest, metric, verdicts.FITS_ID, f"at {longest:,} steps, "))
    for name, label in (("ID", metric.label.replace("OOD", "ID")), ("OOD", metric.label)):
      oks = [j.ok for j in ups[name].values()]
      parts.append(md.verdict(f"{label} rises with the training steps at every (M, K, n_train)",
                              verdicts.overall(oks), verdicts.count(oks)))
    table = []
    for key, c in ids.items():
      table.append([*key, " / ".join(f"{x:,}" for x in c.x),
                    md.fmt(aggregate.gain_per_doubling(c.x, c.mean)),
                    md.reach(steps_to_reach(c.x, c.mean), c.x),
                    md.reach(steps_to_reach(ood[key].x, ood[key].mean), ood[key].x)
                    if key in ood else "-", ups["ID"][key].detail,
                    ups["OOD"][key].detail if key in ups["OOD"] else "-"])
    parts += ["", md.table(["M", "K", "n_train", "steps", "ID gain per doubling (last)",
                            f"steps to ID >= {verdicts.FITS_ID}",
                            f"steps to OOD >= {verdicts.FITS_ID}",
                            "ID rises (95% intervals)", "OOD rises (95% intervals)"], table)]
    seeds = min((c.seeds for c in ood.values()), default=0)
    fname = f"steps_{metric.slug}.png"
    panels: dict = {}
    for key, c in ood.items():
      panels.setdefault(key[:2], []).append(series(f"{key[2]} training tasks", c, ids.get(key)))
    path = figures.curves_png([(f"M = {M}, K = {K}", ss) for (M, K), ss in panels.items()],
                              os.path.join(out_dir, fname), "training steps", metric.label,
                              xscale="log2", hline=verdicts.FITS_ID, chance=metric.chance,
                              title=figures.caption(seeds))
    parts.append(md.figure(os.path.basename(path), f"{metric.label} vs training steps",
                           f"{metric.label} (solid) and ID (dashed) against the schedule length "
                           f"(each its own warmup and decay); target {verdicts.FITS_ID}: fitting "
                           f"the training tasks; {figures.caption(seeds)}."))
  probes = [(label, key) for label, key in PROBES if any(key in r for r in rows)]
  for label, key in probes[:1]:  # does the task decoder follow the schedule, as OOD should?
    oks = [verdicts.rises([aggregate.values(g.rows, key) for g in c.groups]).ok
           for c in aggregate.curves_by(rows, key, by, STEPS).values()]
    parts.append(md.verdict(f"{label} rises with the training steps at every (M, K, n_train)",
                            verdicts.overall(oks), verdicts.count(oks)))
  first = aggregate.group(rows, (*by, STEPS), metrics[0].key)
  late = [m.id_key.replace("id/", "late_rise/", 1) for m in metrics]
  body = [[*g.key, *(c for m in metrics for c in md.cells(g.rows, m)),
           *(md.mean_sd(*aggregate.summarize(aggregate.values(g.rows, k))[:2])
             for k in (*late, *(key for _, key in probes))), g.n] for g in first]
  parts.append("\n" + md.table(
      ["M", "K", "n_train", "steps", *(h for m in metrics for h in md.cell_header(m)),
       *(f"train {m.label.removeprefix('OOD ')}: last-quarter rise" for m in metrics),
       *(label for label, _ in probes), "seeds"], body))
  return "\n".join(parts), []
