"""Report section: decodability of the task constituents per hidden layer, identity-encoded runs
split into those that generalize and those that fail (the paper: failing networks lose the
constituents in deeper layers). Takes the sweep's run rows, the metrics (primary first) and the
output directory; returns its markdown and claims."""

import math
import os
import re

from compgen_jax.analysis import aggregate, figures, load, readings, sections_model, verdicts
from compgen_jax.analysis import claims as claims_table
from compgen_jax.analysis import markdown as md
from compgen_jax.analysis.aggregate import Metric


def hidden_layers(rows: list[dict]) -> list[str]:
  """The student's hidden layers with z probes, in order (dense_0, dense_1, ...): neither the
  encoding (input), the best-layer summary nor the readout."""
  names = []
  for r in rows:
    for k in r:
      m = re.fullmatch(r"z/(.+)/ood_r2", k)
      if m and m.group(1) not in ("input", "best", "readout") and m.group(1) not in names:
        names.append(m.group(1))
  return sorted(names, key=lambda n: (int(n.rsplit("_", 1)[1]) if re.search(r"_\d+$", n)
                                      else -1, n))


def layers(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str):
  """OOD probe R^2 of z per hidden layer, identity-encoded runs of the fitted architectures split
  by an absolute OOD threshold, with the paper's 'failing runs lose the constituents in deeper
  layers' judged inside them (an unfit run's OOD is low for a reason that is not composition)."""
  metric = metrics[0]
  # Identity-encoded runs with both metrics (else neither succeeding nor failing) and probes.
  rows = [r for r in rows if r.get("encoding.name", "identity") == "identity"
          and math.isfinite(load.number(r.get(metric.key)) + load.number(r.get(metric.id_key)))
          and hidden_layers([r])]
  claim_text = ("identity-encoded runs that fail lose the constituents in deeper layers")
  if not rows:
    return "", [claims_table.claim(claim_text, "lost in deeper layers", "-", 0, verdicts.NOT_JUDGED,
                                   None, "no per-layer probes of identity-encoded runs",
                                   composition="-", against_paper="-",
                                   rules=("layers", "layers_did"))]
  bar = sections_model.GENERALIZES
  fitted = readings.fitted_architectures(rows, metric.id_key)
  inside = [r for rs in fitted.values() for r in rs]
  group_of = {id(r): ("unfit" if not any(r is f for f in inside) else
                      "succeeding" if load.number(r.get(metric.key)) >= bar else "failing")
              for r in rows}
  groups = {g: [r for r in rows if group_of[id(r)] == g]
            for g in ("succeeding", "failing", "unfit")}
  archs = ", ".join(readings.architecture_label(k) for k in fitted) or "none"
  judgements, details = _cells(rows, group_of)
  # Both groups are needed (the claim contrasts them), inside an architecture that fits.
  untestable = ("no architecture fits its training tasks" if not fitted else None if judgements
                else f"no (M, K) of the fitted architectures ({archs}) has 2 failing and 2 "
                f"succeeding runs with >= 2 hidden layers")
  word = verdicts.NOT_TESTABLE if untestable else verdicts.overall(judgements)
  fname = "layers_z_ood_r2.png"
  panels, body = [], []
  for architecture in aggregate.group(rows, readings.ARCHITECTURE, metric.key):
    arch, rs_arch = architecture.key, architecture.rows
    series = []
    for g in groups:
      rs = [r for r in rs_arch if group_of[id(r)] == g]
      if not rs:
        continue
      names = hidden_layers(rs)
      stats = [aggregate.summarize(aggregate.values(rs, f"z/{n}/ood_r2")) for n in names]
      series.append(figures.Series(f"{g} ({len(rs)} runs)", names, [s[0] for s in stats],
                                   [s[1] for s in stats], len(rs)))
      body.append([readings.architecture_label(arch), g, len(rs), *md.cells(rs, metric),
                   "; ".join(f"{n}: {md.mean_sd(*s[:2])}" for n, s in zip(names, stats,
                                                                        strict=True))])
    panels.append((readings.architecture_label(arch), series))
  figures.layers_png(panels, os.path.join(out_dir, fname), "OOD probe R^2 of z",
                     "mean ± s.d. over runs (error bars with >= 2 runs)")
  counts = (f"fitted: {archs}; {len(groups['failing'])} failing, {len(groups['succeeding'])} "
            f"succeeding, {len(groups['unfit'])} runs of unfit architectures left out")
  parts = [md.claim("identity-encoded networks that fail lose the task constituents in their "
                    "deeper layers."),
           md.rules(f"only architectures (student, width, depth) every run of which fits (ID "
                    f">= {verdicts.FITS_ID}) are compared: a run of an unfit one has a low OOD "
                    f"for a reason that is not composition", f"inside them a run succeeds when "
                    f"its {metric.label} >= {bar} (absolute), else it fails",
                    "decodability of z per layer is the OOD probe R^2 of each hidden layer",
                    DID, "a cell needs >= 2 runs in each group; none such: not testable here",
                    verdicts.RULES["holm"] + " (over the cells)"),
           "", *(f"- {d}" for d in details),
           md.verdict("failing runs lose the constituents in deeper layers", word,
                      untestable or counts), "",
           md.table(["architecture", "group", "runs", *md.cell_header(metric),
                     "OOD probe R^2 of z per hidden layer (mean ± s.d. over runs)"], body),
           md.figure(fname, "per-layer decodability", f"one panel per architecture; mean ± "
                     f"s.d. over runs ({counts}); error bars only with >= 2 runs.")]
  claim = claims_table.claim(claim_text, "lost in deeper layers",
                             f"within (M, K), failing runs' first-to-last change below "
                             f"succeeding runs': {verdicts.count(judgements)}; "
                             + "; ".join(details), sections_model.seeds(rows, metric), word,
                             fname, untestable or counts,
                             composition=f"groups inside the fitted architectures ({archs}) by "
                             f"absolute OOD >= {bar}: " + (
                                 readings.composition(groups["failing"], metric) + " (failing)"
                                 if groups["failing"] else "no failing run"),
                             against_paper=readings.paper_direction(word)
                             + "; graded data at fixed fit: the decodability_fit sweep",
                             rules=("layers", "layers_did"))
  return "\n".join(parts), [claim]


DID = ("within each (M, K) of a fitted architecture (a cell), each run's first-to-last hidden "
       "layer change of decodability; failing runs lose the constituents in deeper layers when "
       "their change is clearly below succeeding runs' (a difference in differences: 95% Welch "
       "t-interval of the succeeding mean change minus the failing one above 0), since "
       "succeeding runs' decodability may fall with depth too; the last layer's difference "
       "(succeeding minus failing) beside it")


def _change(r: dict) -> float:
  """A run's OOD probe R^2 of z at its last hidden layer minus at its first."""
  names = hidden_layers([r])
  return load.number(r.get(f"z/{names[-1]}/ood_r2")) - load.number(r.get(f"z/{names[0]}/ood_r2"))


def _cells(rows: list[dict], group_of: dict) -> tuple[list, list[str]]:
  """(the difference-in-differences judgement of each testable cell, every cell's line)."""
  cells: dict = {}
  for r in rows:
    if group_of[id(r)] != "unfit" and len(hidden_layers([r])) > 1:
      key = (tuple(r.get(k) for k in readings.ARCHITECTURE), r.get("task.num_modules"),
             r.get("task.max_hotness"))
      cells.setdefault(key, {"failing": [], "succeeding": []})[group_of[id(r)]].append(r)
  judgements, lines = [], []
  for (arch, M, K), c in sorted(cells.items(), key=lambda kv: str(kv[0])):
    fail, succ = c["failing"], c["succeeding"]
    label = f"{readings.architecture_label(arch)}, M={M}, K={K}"
    if len(fail) < 2 or len(succ) < 2:
      lines.append(f"{label}: not testable ({len(fail)} failing, {len(succ)} succeeding)")
      continue
    did = verdicts.lower([_change(r) for r in fail], [_change(r) for r in succ])
    last = verdicts.difference(*([load.number(r.get(f"z/{hidden_layers([r])[-1]}/ood_r2"))
                                  for r in g] for g in (succ, fail)))
    judgements.append(did)
    lines.append(f"{label} ({len(fail)} failing, {len(succ)} succeeding): first-to-last change "
                 f"failing {md.mean_sd(*aggregate.summarize(map(_change, fail))[:2])}, "
                 f"succeeding {md.mean_sd(*aggregate.summarize(map(_change, succ))[:2])}; "
                 f"failing below succeeding: {md.word(did.ok)} (succeeding - failing "
                 f"{did.detail.removeprefix('difference ')}); last layer, succeeding - failing "
                 f"{last.text()}")
  return judgements, lines
