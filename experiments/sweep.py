"""Runs a sweep: one experiments/train.py program per setting of the shape-changing axes.

  python experiments/sweep.py --config=configs/sweeps/width_depth_demo.py:tiny --sweep_dir=/tmp/wd
  python experiments/sweep.py --config=configs/sweeps/width_depth_demo.py:cpu --sweep_dir=/tmp/wd \
      --dry_run                                   # print the train.py command lines, run nothing
  python experiments/sweep.py --config=configs/sweeps/data_scaling.py:paper --sweep_dir=/x \
      --estimate                  # programs, runs, parameters, hours from step rates timed here
  python experiments/sweep.py --config=configs/sweeps/width_depth_demo.py:paper --sweep_dir=/x \
      --launcher=slurm --slurm_partition=gpu --slurm_time=600 --probe --evaluate

Every program is validated before any starts (exit 2 naming the program and field). Re-running
the same command skips finished programs and resumes unfinished ones; a program's processes die
with the sweep (even SIGKILLed), and a re-run at once waits for their workdir's lock. Each
program's output goes to DIR/logs/<name>.log; DIR/index.json records what ran. Exit status 1
when a program failed.
"""

import sys

from absl import flags

from compgen_jax import cli
from compgen_jax.sweeps import estimate, launch, slurm
from compgen_jax.sweeps import program as program_lib

_CONFIG = flags.DEFINE_string("config", None, "Sweep config with preset, e.g. "
                              "configs/sweeps/width_depth_demo.py:tiny.")
_SWEEP_DIR = flags.DEFINE_string("sweep_dir", None, "Directory of the sweep: one workdir per "
                                 "program, logs/, index.json; an existing one is resumed.")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print the command lines; start and write nothing.")
_ESTIMATE = flags.DEFINE_bool("estimate", False, "Print each program's runs, steps, student "
                              "parameters and estimated hours from step rates timed on this "
                              "machine (a short chunk per distinct shape); train and write "
                              "nothing.")
_RATES = flags.DEFINE_string("rates", None, "Estimate (implies --estimate) from the rates in "
                             "this JSON file (as --save_rates writes it, e.g. on a GPU); time "
                             "nothing.")
_SAVE_RATES = flags.DEFINE_string("save_rates", None, "With --estimate: write the rates to this "
                                  "JSON file (for --rates).")
_MAX_RUNS = flags.DEFINE_integer("estimate_max_runs", None, "With --estimate: time at most this "
                                 "many of a program's runs and scale (default: all on an "
                                 f"accelerator, {estimate.CPU_MAX_RUNS} on a CPU).", lower_bound=1)
_BUDGET = flags.DEFINE_float("estimate_budget_s", estimate.BUDGET_S, "With --estimate: seconds "
                             "of timing; shapes left over are extrapolated by parameter count.")
_LAUNCHER = flags.DEFINE_enum("launcher", "local", launch.LAUNCHERS, "local: subprocesses on "
                              "this machine; slurm: a submitit job array; submitit_local: the "
                              "slurm path with submitit's local executor (for testing).")
_PARALLEL = flags.DEFINE_integer("parallel", 1, "local: programs run at once, each on its own "
                                 "share of this process's cores (at most one program per core; "
                                 "on 2 cores 2 do 1.13x the work of 1 end to end: "
                                 "benchmarks/core_sharing.py), the longest first "
                                 "(launch.longest_first). With one GPU keep 1.",
                                 lower_bound=1)
_PROBE = flags.DEFINE_bool("probe", False, "After training, run experiments/probe.py on each "
                           "program (skipped when probes.jsonl has its final step).")
_EVALUATE = flags.DEFINE_bool("evaluate", False, "After training, run experiments/evaluate.py "
                              "--every on each program (skipped when eval.jsonl has its final "
                              "step).")
_PARTITION = flags.DEFINE_string("slurm_partition", None, "SLURM partition (default: the "
                                 "cluster's).")
_TIME = flags.DEFINE_integer("slurm_time", 720, "Time limit per job, minutes.", lower_bound=1)
_GPUS = flags.DEFINE_integer("slurm_gpus", 1, "GPUs per job.", lower_bound=0)
_CPUS = flags.DEFINE_integer("slurm_cpus", None, "CPUs per job (default: the cluster's).")
_MEM = flags.DEFINE_integer("slurm_mem_gb", None, "Memory per job, GB (default: the cluster's).")
_NODES = flags.DEFINE_integer("slurm_nodes", 1, "Nodes per program: above 1 each program is "
                              "one multi-host job (one task per node; training gets "
                              "--distributed and shards its runs over every node's devices).",
                              lower_bound=1)
_ARRAY = flags.DEFINE_integer("slurm_array_parallelism", None, "Jobs of the array running at "
                              "once (default: submitit's).")
cli.mark_required(["config", "sweep_dir"])


def main(argv):
  del argv
  cli.quiet_logging()
  if _ESTIMATE.value or _RATES.value:
    if _RATES.value:
      program_lib.host_only()  # nothing to time
    estimate.run_estimate(_CONFIG.value, _SWEEP_DIR.value, _RATES.value, _MAX_RUNS.value,
                          _BUDGET.value, _SAVE_RATES.value, launch.echo)
    return
  program_lib.host_only()
  options = slurm.Options(_PARTITION.value, _TIME.value, _GPUS.value, _CPUS.value, _MEM.value,
                          _ARRAY.value, _NODES.value)
  failures = launch.run_sweep(_CONFIG.value, _SWEEP_DIR.value, _LAUNCHER.value,
                              _PARALLEL.value, _DRY_RUN.value, _PROBE.value, _EVALUATE.value,
                              options)
  if failures:
    print(f"error: {len(failures)} program(s) failed: " + "; ".join(
        f"{f['name']} (exit {f['exit_code']} in {f['stage']}, log {f['log']})"
        for f in failures), file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  cli.run(main)
