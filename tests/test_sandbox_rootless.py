"""The sandbox without root (issue 41). Run as root (as CI runs), the attack tests run a second
time as an ordinary user created here, where a user namespace must isolate every job; the
one-line refusal names the kernel setting that switches user namespaces off."""

import inspect
import os
import re
import shutil
import subprocess
import sys

import pytest

from compgen_jax.llm_eval import sandbox
from tests import helpers, test_sandbox_attacks, test_sandbox_attacks_processes

ATTACKS = (test_sandbox_attacks, test_sandbox_attacks_processes)
# What the job sees, and that it holds no capability (test_sandbox.py)
VIEW = "tests/test_sandbox.py::test_isolated_job_sees_only_the_interpreter"
PROBE = ("from compgen_jax.llm_eval import sandbox\n"
         "print(sandbox.mechanism(), sandbox.isolation_problem(), sep='\\n')")


@pytest.fixture(scope="module")
def user(tmp_path_factory):
  """(uid, gid, environment) of an ordinary user made for this module, deleted after it."""
  if os.geteuid() != 0:
    pytest.skip("not root: the attack tests already ran as this ordinary user")
  if shutil.which("useradd") is None:
    pytest.skip("no useradd here to make an ordinary user")
  if sandbox.isolation_problem():  # e.g. a container without CAP_SYS_ADMIN
    pytest.skip(f"no sandbox isolation here, even as root: {sandbox.isolation_problem()}")
  uid, gid, name = helpers.ordinary_user("compgen")
  home = tmp_path_factory.mktemp("home")
  os.chown(home, uid, gid)
  # The venv's own interpreter and this checkout first on the path; nothing of root's
  # environment: the user's scratch (pytest's basetemp, jax's cache) lives in its own home.
  yield uid, gid, dict(PATH=f"{os.path.dirname(sys.executable)}:/usr/bin:/bin", HOME=str(home),
                       TMPDIR=str(home), PYTHONPATH=helpers.REPO, PYTHONDONTWRITEBYTECODE="1",
                       LANG="C.UTF-8")
  subprocess.run(["userdel", name], check=True)


def test_attacks_are_contained_as_an_ordinary_user(user):
  uid, gid, env = user
  probe = helpers.run_as(uid, gid, [sys.executable, "-c", PROBE], env, timeout_s=60)
  if "Permission denied" in probe.stderr:  # e.g. a checkout its owner alone may read
    pytest.skip(f"an ordinary user cannot read this checkout: {probe.stderr.splitlines()[-1]}")
  assert probe.returncode == 0, probe.stderr[-2000:]
  mechanism, problem = probe.stdout.splitlines()
  if mechanism == "None":
    pytest.skip(f"no user namespaces for an ordinary user here: {problem}")
  assert mechanism == sandbox.USER_NAMESPACE
  files = [os.path.relpath(m.__file__, helpers.REPO) for m in ATTACKS]
  tests = {f"{path}::{name}" for path, module in zip(files, ATTACKS, strict=True)
           for name, f in vars(module).items()
           if name.startswith("test_") and inspect.isfunction(f)} | {VIEW}
  proc = helpers.run_as(uid, gid, [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                                   "-p", "no:xdist", "-q", "-rA", *files, VIEW], env, timeout_s=600)
  assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
  assert set(re.findall(r"^PASSED (\S+)", proc.stdout, re.MULTILINE)) == tests


def test_refusal_names_the_setting_that_would_allow_it():
  allowed = {"kernel.unprivileged_userns_clone": "1", "user.max_user_namespaces": "96362",
             "kernel.apparmor_restrict_unprivileged_userns": "0"}
  assert sandbox.userns_refusal(allowed) is None and sandbox.userns_refusal({}) is None
  for name, (off, allow) in sandbox.USERNS_SETTINGS.items():
    line = sandbox.userns_refusal(allowed | {name: off})
    assert f"{name} = {off}" in line and f"to {allow}" in line and "\n" not in line


@pytest.mark.skipif(sandbox.mechanism() is None, reason="no sandbox isolation here at all")
def test_refuses_where_user_namespaces_are_switched_off():
  # In a user namespace of its own whose user.max_user_namespaces is 0 (the sysctl is per
  # namespace), neither mechanism works: uid 0 there cannot switch to a fresh uid (none is
  # mapped), and no further user namespace may be made.
  script = (f"echo 0 > /proc/sys/user/max_user_namespaces && exec {sys.executable} -c "
            f"\"{PROBE}\"")
  proc = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c", script],
                        capture_output=True, text=True, cwd=helpers.REPO, timeout=60,
                        env=dict(os.environ, PYTHONPATH=helpers.REPO))
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.splitlines() == [
      "None", "unprivileged user namespaces are disabled (user.max_user_namespaces = 0); "
      "setting it to a positive number, or running as root, allows them"]
