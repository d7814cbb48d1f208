"""Stopping a private Ray head stops its processes and no others (kueri.scaleout), shown without Ray.

A head's processes are found by the Unix session its ``ray start`` led, by its temp folder on their command
lines, and as children of those; here two stand-in "clusters" are process trees in sessions of their own
(what Ray's daemons and workers look like to /proc), and a third tree lives in the test's own session.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kueri.scaleout import LocalCluster, cluster_processes, free_ports, stop_local_cluster

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

#: A session leader that starts a child in its own process group (as the raylet's workers are) and a
#: grandchild that leaves the session (setsid); it says "ready" once all of them run, then waits.
TREE = """
import os, subprocess, sys, time
folder = sys.argv[1]
SLEEP = "import os, sys, time; open(os.path.join(sys.argv[1], sys.argv[2]), 'w').close(); time.sleep(300)"
subprocess.Popen([sys.executable, "-c", SLEEP, folder, "child"], process_group=0)
subprocess.Popen([sys.executable, "-c", "import os, subprocess, sys; subprocess.Popen([sys.executable, '-c', "
                  "'import os; os.setsid(); ' + sys.argv[3], sys.argv[1], 'grandchild']); " + SLEEP,
                  folder, "middle", SLEEP])
deadline = time.monotonic() + 60
while not all(os.path.exists(os.path.join(folder, name)) for name in ("child", "middle", "grandchild")):
    if time.monotonic() > deadline:
        sys.exit("not ready")
    time.sleep(0.01)
print("ready", flush=True)
time.sleep(300)
"""


def start_tree(tmp_path: Path, name: str, new_session: bool = True) -> tuple[subprocess.Popen, LocalCluster]:
    folder = tmp_path / name
    folder.mkdir()
    tree = subprocess.Popen([sys.executable, "-c", TREE, str(folder)], stdout=subprocess.PIPE, text=True,
                            start_new_session=new_session)
    assert tree.stdout.readline().strip() == "ready"
    return tree, LocalCluster("127.0.0.1:0", folder, tree.pid)


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_stopping_one_cluster_leaves_the_others_and_this_process(tmp_path):
    ours_tree, ours = start_tree(tmp_path, "ours")
    theirs_tree, theirs = start_tree(tmp_path, "theirs")
    beside = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # in the test's session
    try:
        found = cluster_processes(ours)
        # the leader, its child in another process group, that one's child, and the grandchild outside the session
        assert len(found) == 4 and ours_tree.pid in found, found
        theirs_found = cluster_processes(theirs)
        assert len(theirs_found) == 4 and not set(found) & set(theirs_found)
        assert os.getpid() not in found and beside.pid not in found

        stopped = stop_local_cluster(ours, grace=2)
        assert stopped == found
        ours_tree.wait(timeout=10)
        assert not any(alive(pid) for pid in found)
        assert not ours.temp_dir.exists()
        assert all(alive(pid) for pid in theirs_found) and alive(beside.pid) and alive(os.getpid())
    finally:
        stop_local_cluster(theirs, grace=2)
        beside.kill()
        for process in (ours_tree, theirs_tree, beside):
            process.wait(timeout=10)
    assert cluster_processes(theirs) == []


def test_a_cluster_already_gone_stops_quietly(tmp_path):
    tree, cluster = start_tree(tmp_path, "gone")
    stop_local_cluster(cluster, grace=2)
    tree.wait(timeout=10)
    assert stop_local_cluster(cluster, grace=2) == []


def test_free_ports_are_distinct():
    ports = free_ports(9)
    assert len(set(ports)) == 9 and all(1024 <= port < 65536 for port in ports)
