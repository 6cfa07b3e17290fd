"""A real single-host SLURM cluster for tests: munged, slurmctld and two slurmd nodes on
localhost, every config, key, socket, state and log file in one private directory.

Installs Debian's slurm-wlm and munge when they are missing (root and apt-get needed); `start`
returns None with a one-line reason where SLURM cannot run, so the tests skip. Two nodes
(`localhost`, named so that JAX's SLURM detection can reach the coordinator, and `n2`) share
the machine with their own slurmd (`slurmd -N`): a 2-node job then runs here. There is no
slurmdbd, so `sacct` answers nothing (accounting_storage/none): submitit learns that a job
ended from its result file, and the launcher reads other states from squeue.
"""

import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import NamedTuple

PACKAGES = ("slurm-wlm", "munge")
DAEMONS = ("munged", "slurmctld", "slurmd")
INSTALL_TIMEOUT_S = 150  # for all of apt-get's commands together
START_TIMEOUT_S = 60
# "localhost" second: with one node defined, slurm takes that node named localhost for any name.
NODES = ("n2", "localhost")
ACTIVE = ("PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "SUSPENDED")

SLURM_CONF = """\
ClusterName=compgen
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={dir}/munge.socket,cred_expire=5
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool/%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.%n.pid
SlurmctldLogFile={dir}/log/slurmctld.log
SlurmdLogFile={dir}/log/slurmd.%n.log
PlugStackConfig={dir}/plugstack.conf
TmpFS={dir}/tmp
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={dir}/log/jobcomp.log
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
KillWait=5
SchedulerParameters=sched_interval=1
{nodes}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


class Cluster(NamedTuple):
  dir: str
  env: dict  # os.environ plus SLURM_CONF: what a client command (sbatch, squeue) needs
  daemons: list  # Popen of each daemon, started in the foreground


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _apt_get(deadline: float, *args: str) -> str | None:
  """apt-get ARGS, killed at `deadline` (time.monotonic); None, or why it failed."""
  try:
    result = subprocess.run(["apt-get", *args], capture_output=True, text=True,
                            timeout=max(1.0, deadline - time.monotonic()),
                            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
  except subprocess.TimeoutExpired:
    return f"apt-get {args[0]} ran past the {INSTALL_TIMEOUT_S} s allowed"
  if result.returncode == 0:
    return None
  return (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]


def install() -> str | None:
  """Installs the packages where they are missing (updating the package lists if the first try
  fails); None, or the reason it cannot. A file lock keeps pytest workers from running apt-get
  at once, and a failure is tried once per test run (the workers share its id)."""
  if all(shutil.which(d) for d in DAEMONS):
    return None
  if os.geteuid() != 0 or not shutil.which("apt-get"):
    return "SLURM is not installed and installing it needs root and apt-get"
  run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID", str(os.getpid()))
  failed = os.path.join(tempfile.gettempdir(), f"compgen_jax_slurm_install_{run_id}.failed")
  with open(os.path.join(tempfile.gettempdir(), "compgen_jax_slurm_install.lock"), "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if os.path.exists(failed):
      with open(failed) as f:
        return f.read()
    if all(shutil.which(d) for d in DAEMONS):
      return None
    deadline = time.monotonic() + INSTALL_TIMEOUT_S
    command = ("install", "-y", "-q", "--no-install-recommends", *PACKAGES)
    error = _apt_get(deadline, *command) and (_apt_get(deadline, "update", "-q")
                                              or _apt_get(deadline, *command))
    missing = [d for d in DAEMONS if not shutil.which(d)]
    reason = (f"apt-get install {' '.join(PACKAGES)} failed: {error}" if error else
              f"{', '.join(missing)} not on PATH after installing" if missing else None)
    if reason:
      with open(failed, "w") as f:
        f.write(reason)
  return reason


def _node_lines(ports: list[int]) -> str:
  """Both nodes with this machine's CPUs and memory, as `slurmd -C` reports them."""
  hardware = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True,
                            timeout=30).stdout.splitlines()[0].split()[1:]
  keep = [f for f in hardware if f.split("=")[0] in ("CPUs", "Boards", "SocketsPerBoard",
                                                        "CoresPerSocket", "ThreadsPerCore",
                                                        "RealMemory")]
  return "\n".join(f"NodeName={name} NodeAddr=127.0.0.1 Port={port} "
                   + " ".join(keep) for name, port in zip(NODES, ports, strict=True))


def _wait_nodes_idle(cluster: Cluster, timeout_s: float) -> bool:
  """Both nodes registered and idle; False once a daemon has exited or after `timeout_s`."""
  deadline = time.monotonic() + timeout_s
  while time.monotonic() < deadline and all(d.poll() is None for d in cluster.daemons):
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=cluster.env,
                         capture_output=True, text=True, timeout=30).stdout.split()
    states = dict(zip(out[::2], out[1::2], strict=True))
    if sorted(states) == sorted(NODES) and all(s == "idle" for s in states.values()):
      return True
    time.sleep(0.5)
  return False


def start(directory: str) -> tuple[Cluster | None, str | None]:
  """Starts munged, slurmctld and one slurmd per node with their files under `directory`;
  (cluster, None), or (None, the reason it cannot run) with nothing left running."""
  if os.geteuid() != 0:
    return None, "the test cluster runs its daemons as root (SlurmUser=root)"
  reason = install()
  if reason:
    return None, reason
  for sub in ("state", "log", "tmp", *(f"spool/{n}" for n in NODES)):
    os.makedirs(os.path.join(directory, sub), exist_ok=True)
  with open(os.path.join(directory, "munge.key"), "wb") as f:
    f.write(os.urandom(1024))
  os.chmod(os.path.join(directory, "munge.key"), 0o400)
  open(os.path.join(directory, "plugstack.conf"), "w").close()
  conf = os.path.join(directory, "slurm.conf")
  with open(conf, "w") as f:
    f.write(SLURM_CONF.format(dir=directory, ctld_port=_free_port(),
                              nodes=_node_lines([_free_port() for _ in NODES])))
  env = {**os.environ, "SLURM_CONF": conf}
  d = directory
  commands = [["munged", "-F", "--force", f"--socket={d}/munge.socket",
               f"--key-file={d}/munge.key", f"--pid-file={d}/munged.pid",
               f"--log-file={d}/log/munged.log", f"--seed-file={d}/munge.seed"],
              ["slurmctld", "-D", "-c", "-f", conf]]
  commands += [["slurmd", "-D", "-f", conf, "-N", name] for name in NODES]
  cluster = Cluster(directory, env, [])
  with open(os.path.join(directory, "log", "daemons.out"), "ab") as log:
    for command in commands:
      cluster.daemons.append(subprocess.Popen(command, env=env, stdout=log, stderr=log,
                                              start_new_session=True))
      if command[0] == "munged":
        _wait_for(lambda: os.path.exists(f"{d}/munge.socket"), 10)
  if not _wait_nodes_idle(cluster, START_TIMEOUT_S):
    exited = [c[0] for c, p in zip(commands, cluster.daemons, strict=True) if p.poll() is not None]
    stop(cluster)
    with open(os.path.join(directory, "log", "daemons.out")) as f:  # MPI plugins always complain
      errors = [l for l in f if re.search("error|fatal", l) and not re.search("(?i)mpi", l)]
    why = f"{', '.join(exited)} exited" if exited else f"not idle after {START_TIMEOUT_S} s"
    return None, f"SLURM did not start: {why} ({errors[0].strip() if errors else directory})"
  return cluster, None


def _wait_for(predicate, timeout_s: float) -> bool:
  deadline = time.monotonic() + timeout_s
  while not predicate():
    if time.monotonic() > deadline:
      return False
    time.sleep(0.1)
  return True


def stop(cluster: Cluster) -> None:
  """Cancels every job, waits for their processes to end, then stops the daemons."""
  if cluster.daemons[1:] and cluster.daemons[1].poll() is None:
    subprocess.run(["scancel", "--full", "--partition=debug"], env=cluster.env,
                   capture_output=True, timeout=30)
    settled(cluster, 30)
  for daemon in reversed(cluster.daemons):  # slurmd first, munged last
    if daemon.poll() is None:
      os.killpg(daemon.pid, signal.SIGTERM)
    try:
      daemon.wait(timeout=30)
    except subprocess.TimeoutExpired:
      os.killpg(daemon.pid, signal.SIGKILL)
      daemon.wait()


def jobs(cluster: Cluster) -> dict:
  """Job id -> state of every job the controller still knows (squeue: no accounting here)."""
  out = subprocess.run(["squeue", "-h", "-a", "-r", "-t", "all", "-o", "%i %T"],
                       env=cluster.env, capture_output=True, text=True, timeout=30).stdout
  return dict(line.split() for line in out.splitlines() if line.strip())


def settled(cluster: Cluster, timeout_s: float) -> dict:
  """`jobs` once none is queued or running any more (or after `timeout_s`): a job's result file
  is written before its processes have ended."""
  _wait_for(lambda: not set(jobs(cluster).values()) & set(ACTIVE), timeout_s)
  return jobs(cluster)
