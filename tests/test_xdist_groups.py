"""`make test` runs with --dist=loadgroup: the tests of one xdist_group (a module whose fixture is
built once, modules sharing a session fixture such as the tiny sweep) must run on one worker.
pytest-xdist groups a test by suffixing its node id with "@<group>" on the worker; pytest 9.2
moved the node id elsewhere, so the suffix (and every group) silently vanished and each worker
built the shared fixtures again. This fails if an upgrade does that again."""

import pytest

pytestmark = pytest.mark.xdist_group("xdist_groups")


def test_a_grouped_test_carries_its_group_in_the_id_the_scheduler_reads(request):
  if not getattr(request.config.option, "loadgroup", False):
    pytest.skip("checks pytest -n N --dist=loadgroup, as make test runs it")
  assert request.node.nodeid.endswith("@xdist_groups"), request.node.nodeid
