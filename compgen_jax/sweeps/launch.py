"""run_sweep: validate every program, then print them (dry run) or run the unfinished ones,
locally (sequentially or N at a time, each on its own share of the cores) or through submitit,
recording each in the index."""

import functools
import os
import queue
from concurrent import futures

from compgen_jax import checks
from compgen_jax import workdir as workdir_lib
from compgen_jax.sweeps import estimate, slurm
from compgen_jax.sweeps import program as program_lib
from compgen_jax.sweeps import spec as spec_lib
from compgen_jax.sweeps.index import Index
from compgen_jax.sweeps.spec import Program, Sweep
from compgen_jax.types import ConfigError

LAUNCHERS = ("local", *slurm.CLUSTERS)
echo = functools.partial(print, flush=True)


def dry_run(sweep: Sweep) -> None:
  """Prints each program's train.py command line (run from the repository root)."""
  echo(f"# sweep {sweep.name} ({sweep.spec}): {len(sweep.programs)} programs; run from "
       f"{spec_lib.REPO}")
  for program in sweep.programs:
    echo(spec_lib.shell(program.command))


def core_shares(parallel: int) -> list[tuple[int, ...]] | None:
  """The cores of each of `parallel` program slots: this process's cores split into disjoint
  shares, so each program's XLA sizes its thread pool to its share instead of every program
  spreading over every core. On 2 cores two programs on one core each do 1.22x the run-steps
  of one program on both (benchmarks/throughput.py, pinned with taskset), 1.13x end to end with
  start-up and compilation (benchmarks/core_sharing.py): XLA:CPU keeps only part of a small step
  busy on a second thread. None (no pinning) for one program or off Linux."""
  if parallel == 1 or not hasattr(os, "sched_getaffinity"):
    return None
  cores = sorted(os.sched_getaffinity(0))
  if parallel > len(cores):
    raise ConfigError("parallel", f"{parallel} programs at once need as many cores; this "
                      f"process may use {len(cores)}")
  return [tuple(cores[i::parallel]) for i in range(parallel)]


def longest_first(programs: list[Program]) -> list[Program]:
  """The programs in decreasing `estimate.work`, ties in config order, so that with several
  running at once the longest do not start last and finish alone on one share of the cores
  (longest processing time first). Config order unless every program trains one family
  (task and student, estimate.family) of the scaling experiment: across families the work
  proxy does not compare."""
  if (len(programs) < 2 or any(p.app != "scaling" or p.config is None for p in programs)
      or len({estimate.family(p.config) for p in programs}) > 1):
    return list(programs)
  work = [estimate.work(p.config) for p in programs]
  order = sorted(range(len(programs)), key=lambda i: -work[i])  # stable: ties keep config order
  return [programs[i] for i in order]


def run_local(to_run: list[Program], parallel: int, probe: bool, evaluate: bool,
              index: Index) -> None:
  """Runs the programs as subprocesses, `parallel` at a time, each on its own share of the
  cores (core_shares); one failing never stops the rest."""
  shares = core_shares(parallel)
  free = queue.SimpleQueue()
  for share in shares or [None] * parallel:
    free.put(share)

  def work(program: Program) -> None:
    index.start(program.name)
    cores = free.get()
    try:
      index.finish(program.name, program_lib.run(program, probe, evaluate, cores=cores))
    finally:
      free.put(cores)

  with futures.ThreadPoolExecutor(max_workers=parallel) as pool:
    running = [pool.submit(work, program) for program in to_run]
    try:
      for done in futures.as_completed(running):
        done.result()
    except KeyboardInterrupt:
      pool.shutdown(wait=False, cancel_futures=True)  # the running ones got the SIGINT too
      raise


def run_sweep(spec: str, sweep_dir: str, launcher: str = "local", parallel: int = 1,
              dry: bool = False, probe: bool = False, evaluate: bool = False,
              slurm_options: slurm.Options | None = None) -> list[dict]:
  """Runs (or, `dry`, prints) the sweep config `spec` into `sweep_dir`; returns the index
  entries of the programs that failed. Nothing is written before every program validates."""
  checks.choice("launcher", launcher, LAUNCHERS)
  if parallel < 1 or (parallel > 1 and launcher != "local"):
    raise ConfigError("parallel", f"must be >= 1, and 1 unless the launcher is local (SLURM: "
                      f"slurm_array_parallelism), got {parallel} with {launcher}")
  if slurm_options is not None and slurm_options.nodes > 1 and launcher != "slurm":
    raise ConfigError("slurm_nodes", f"{slurm_options.nodes} nodes per program need the slurm "
                      f"launcher, not {launcher}")
  if launcher == "local":
    core_shares(parallel)  # more programs at once than cores: refused before anything is written
  sweep = spec_lib.load(spec, sweep_dir)
  if dry:
    dry_run(sweep)
    return []
  to_run = [p for p in sweep.programs if program_lib.pending_stages(p, probe, evaluate)]
  os.makedirs(sweep.sweep_dir, exist_ok=True)
  if sweep.app == "scaling":  # what its report's setting section compares with
    spec_lib.write_paper_programs(sweep.sweep_dir, sweep.spec)
  index = Index(sweep, launcher, [p.name for p in to_run], echo,
                parallel=parallel if launcher == "local" else None)
  if launcher == "local":
    run_local(longest_first(to_run) if parallel > 1 else to_run, parallel, probe, evaluate, index)
  elif to_run:
    slurm.run(sweep, to_run, launcher, slurm_options or slurm.Options(), probe, evaluate, index)
  failures = index.failures()
  echo(f"sweep {sweep.name}: {len(sweep.programs) - len(failures)} done, {len(failures)} failed; "
       f"index {workdir_lib.index_path(sweep.sweep_dir)}")
  return failures
