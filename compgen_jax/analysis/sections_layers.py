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
                                   composition="-", against_paper="-")]
  bar = sections_model.GENERALIZES
  fitted = readings.fitted_architectures(rows, metric.id_key)
  inside = [r for rs in fitted.values() for r in rs]
  group_of = {id(r): ("unfit" if not any(r is f for f in inside) else
                      "succeeding" if load.number(r.get(metric.key)) >= bar else "failing")
              for r in rows}
  groups = {g: [r for r in rows if group_of[id(r)] == g]
            for g in ("succeeding", "failing", "unfit")}
  first_last = {g: [(load.number(r.get(f"z/{hl[0]}/ood_r2")),
                     load.number(r.get(f"z/{hl[-1]}/ood_r2")))
                    for r in rs for hl in [hidden_layers([r])] if len(hl) > 1]
                for g, rs in groups.items()}
  fail, succ = first_last["failing"], first_last["succeeding"]
  drop = verdicts.mean_interval([last - first for first, last in fail])
  loses = (verdicts.Judgement(None, "fewer than 2 failing runs") if drop is None
           else verdicts.Judgement(bool(drop.high < 0), f"last - first {drop.text()}, "
                                   f"{len(fail)} runs", drop.p))
  lower = (verdicts.Judgement(None, "fewer than 2 runs in a group")
           if len(fail) < 2 or len(succ) < 2
           else verdicts.lower([f[1] for f in fail], [s[1] for s in succ]))
  archs = ", ".join(readings.architecture_label(k) for k in fitted) or "none"
  # Both groups are needed (the claim contrasts them), inside an architecture that fits.
  untestable = ("no architecture fits its training tasks" if not fitted else
                None if len(fail) >= 2 and len(succ) >= 2 else
                f"the fitted architectures ({archs}) have {len(fail)} failing and {len(succ)} "
                f"succeeding runs with >= 2 hidden layers (2 of each needed)")
  word = verdicts.NOT_TESTABLE if untestable else verdicts.overall([loses, lower])
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
                    "decodability of z per layer is the OOD probe R^2 of each hidden layer; "
                    "the first and last hidden layers are compared per run (95% t-interval of "
                    "the mean difference over failing runs)",
                    verdicts.RULES["lower"] + " (over runs, at the last hidden layer)",
                    "a group needs >= 2 runs, else not testable here", verdicts.RULES["holm"]),
           "",
           md.judged("failing runs: decodability at the last hidden layer lower than at the "
                     "first", loses),
           md.judged("at the last hidden layer, failing runs lower than succeeding runs", lower),
           md.verdict("failing runs lose the constituents in deeper layers", word,
                      untestable or counts), "",
           md.table(["architecture", "group", "runs", *md.cell_header(metric),
                     "OOD probe R^2 of z per hidden layer (mean ± s.d. over runs)"], body),
           md.figure(fname, "per-layer decodability", f"one panel per architecture; mean ± "
                     f"s.d. over runs ({counts}); error bars only with >= 2 runs.")]
  claim = claims_table.claim(claim_text, "lost in deeper layers",
                             f"failing runs, last vs first hidden layer: {md.word(loses.ok)} "
                             f"({loses.detail}); last layer, failing vs succeeding: "
                             f"{md.word(lower.ok)} ({lower.detail})",
                             sections_model.seeds(rows, metric), word, fname,
                             untestable or counts,
                             composition=f"groups inside the fitted architectures ({archs}) by "
                             f"absolute OOD >= {bar}: " + (
                                 readings.composition(groups["failing"], metric) + " (failing)"
                                 if groups["failing"] else "no failing run"),
                             against_paper=readings.paper_direction(word)
                             + "; graded data at fixed fit: the decodability_fit sweep")
  return "\n".join(parts), [claim]
