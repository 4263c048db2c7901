"""Facts about a candidate's worker observed from outside its process (gauntlet.judge.sandbox.tasks, .channel,
.cgroup, gathered by .outside): what they catch, and what they cost per reply."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from gauntlet import discover
from gauntlet.judge.evaluate import Options, evaluate
from gauntlet.judge.sandbox import cgroup, channel, tasks

HERE = Path(__file__).parent
FIXTURES = {"hoards_memory_in_flight"}     # judged here, not by test_bad_solutions' table


def test_memory_held_in_flight_is_bounded_by_the_kernel_or_the_record_says_it_is_not(monkeypatch):
    """3 x 512 MiB of memfds in flight in a socket pair, under a 1 GiB bound: a crash naming the bound where cgroup v2
    memory is delegated; elsewhere (cgroup v1 CI machines) the record says only the rss watch was in force."""
    monkeypatch.setenv("GAUNTLET_WORKER_RAM_GIB", "1")
    record = evaluate(discover.get_problem("gemm"),
                      discover.get_solution("gemm", str(HERE / "bad" / "hoards_memory_in_flight.py")),
                      Options(device="cpu", dtypes=("float32",), examples=1, max_edges=1, timing=False))
    bound = record.confinement["candidate"]["memory_bound"]
    folder, why = cgroup.parent()
    if folder is not None:
        assert bound == "cgroup v2 memory.max 1.0 GiB"
        assert record.verdict != "pass" and any(r["code"] == "crash" and "memory.max 1.0 GiB" in r["detail"]
                                                for r in record.reasons), record.reasons
    else:
        assert bound == f"rss watch only ({why})", bound


def test_the_group_says_why_it_is_missing_or_holds_its_bound():
    group = cgroup.Group(1 << 30)
    try:
        if group.path is None:
            assert group.describe().startswith("rss watch only (") and group.why
        else:
            with open(os.path.join(group.path, "memory.max")) as fh:
                assert int(fh.read()) == 1 << 30
            assert group.tripped() is None
    finally:
        group.remove()


# Plays the worker: holds the handed descriptors, and on each line of stdin runs it (a dup, a dup2) and says "ok".
WORKER = "import os, sys\nfor line in sys.stdin:\n    exec(line)\n    print('ok', flush=True)\n"


def _worker():
    """A process holding a request read end and a reply write end, as a worker does; the judge's ends stay here."""
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    fds = [channel.handed(req_r, "request", req_w, os.O_RDONLY), channel.handed(resp_w, "reply", resp_r, os.O_WRONLY)]
    proc = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            pass_fds=(req_r, resp_w))
    os.close(req_r)
    os.close(resp_w)
    return proc, channel.Channel(fds), (req_w, resp_r), resp_w


def _tell(proc, line):
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "ok"


def test_the_channel_check_sees_a_swapped_reply_descriptor_and_a_kept_copy():
    proc, chan, ends, resp_w = _worker()
    try:
        assert chan.check(proc.pid) is None
        _tell(proc, f"copy = os.dup({resp_w})")
        found = chan.check(proc.pid)
        assert found and "a second descriptor of the judge's reply pipe" in found, found
        _tell(proc, f"r, w = os.pipe(); os.dup2(w, {resp_w})")       # the relay's swap; the real end lives on as copy
        found = chan.check(proc.pid)
        assert found and found.startswith(f"the reply descriptor was replaced: fd {resp_w} is pipe:["), found
        _tell(proc, f"os.dup2(copy, {resp_w}); os.close(copy)")       # swapped back between replies: unseen
        assert chan.check(proc.pid) is None
    finally:
        proc.kill()
        proc.wait()
        for fd in ends:
            os.close(fd)


def test_the_channel_check_costs_little_per_reply():
    """A reply's check: a few stats, the fdinfo flags and one pass over the worker's fd folder. Printed for the
    record; the bound only catches a check gone quadratic."""
    proc, chan, ends, _ = _worker()
    try:
        n = 500
        t0 = time.perf_counter()
        for _ in range(n):
            assert chan.check(proc.pid) is None
        per = (time.perf_counter() - t0) / n * 1e6
        print(f"channel check: {per:.0f} us per reply, {len(os.listdir(f'/proc/{proc.pid}/fd'))} fds in the worker")
        assert per < 20_000
    finally:
        proc.kill()
        proc.wait()
        for fd in ends:
            os.close(fd)


def test_a_new_task_that_outlives_the_call_is_named_and_an_idle_spinner_is_caught():
    import _thread
    import threading
    me = os.getpid()
    watch = tasks.TaskWatch(me, lambda: [me])
    watch.start_up()
    watch.hello()
    watch.before_request()
    stop = threading.Event()
    _thread.start_new_thread(lambda: stop.wait(), ())
    found = watch.after_reply()
    assert "1 task(s) started during the call" in found and "seen in /proc by the judge" in found
    # a spinner while "the main thread waits": this test's main thread sleeps between the reply and the request
    done = []

    def spin():
        while not done:
            pass
    _thread.start_new_thread(spin, ())
    watch.before_request()
    watch.after_reply()
    time.sleep(0.6)
    watch.before_request()
    found = watch.after_reply()
    done.append(1)
    stop.set()
    assert "used CPU while the worker's main thread waited" in found, found


def test_a_group_holding_processes_gets_its_memory_controller_only_when_the_leaf_move_is_asked(tmp_path, monkeypatch):
    """cgroup v2's "no internal processes": +memory in a group with processes in it is EBUSY. By default the record
    says why and what to set; with GAUNTLET_CGROUP_LEAF=1 the group's processes move into a leaf first. A fake
    group folder stands in for /sys/fs/cgroup's (its subtree_control refuses while cgroup.procs lists a pid)."""
    import errno
    group = tmp_path / "job"
    group.mkdir()
    (group / "cgroup.controllers").write_text("cpu memory pids\n")
    (group / "cgroup.subtree_control").write_text("")
    (group / "cgroup.procs").write_text("101\n102\n")
    monkeypatch.setattr(cgroup, "_mounts", lambda: [str(tmp_path)])
    monkeypatch.setattr(cgroup, "_own_group", lambda: "/job")
    real_write = cgroup._write

    def write(path, text):
        if path.endswith("subtree_control") and (group / "cgroup.procs").read_text().split():
            raise OSError(errno.EBUSY, "Device or resource busy")
        if path.endswith("cgroup.procs") and "gauntlet-leaf" in path:        # the kernel moves the process
            left = [p for p in (group / "cgroup.procs").read_text().split() if p != text]
            (group / "cgroup.procs").write_text("\n".join(left))
        real_write(path, text)
    monkeypatch.setattr(cgroup, "_write", write)

    monkeypatch.delenv("GAUNTLET_CGROUP_LEAF", raising=False)
    folder, why = cgroup.parent()
    assert folder is None and "GAUNTLET_CGROUP_LEAF=1" in why and "Device or resource busy" in why
    assert (group / "cgroup.procs").read_text().split() == ["101", "102"]          # nothing moved uninvited
    monkeypatch.setenv("GAUNTLET_CGROUP_LEAF", "1")
    folder, why = cgroup.parent()
    assert (folder, why) == (str(group), "")
    assert (group / "gauntlet-leaf" / "cgroup.procs").read_text() == "102"          # the last pid written
    assert (group / "cgroup.subtree_control").read_text() == "+memory"
