"""An idle kernel is silent (issue 40): every IOPub message counts as the kernel's activity for
jupyter_server's ``cull_idle_timeout`` and, through the server's ``last_activity``, for
JupyterHub's idle culler, so between cells the agent sends nothing unless this kernel's own
figures moved. Real kernels, the agent as the browser sends it, every IOPub message counted."""

import time

import pytest
from conftest import PROTOCOL

pytestmark = pytest.mark.timeout(120)

INTERVAL_MS = 250  # the shortest period: the most chances to speak


def iopub_after(kernel, since):
    """The IOPub message types read after ``since`` (time.monotonic())."""
    kernel.pump(0)
    return [kind for at, kind in kernel.iopub_log if at > since]


def quiet_from_now(kernel, comm, settle=1.0):
    """Let the sample that closes the last cell arrive; returns the time from which the kernel
    should be silent."""
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline:
        kernel.pump(0.1)
    return time.monotonic()


def test_an_idle_kernel_sends_nothing_with_its_comm_open(new_kernel):
    kernel = new_kernel()
    kernel.inject({"sampleIntervalMs": INTERVAL_MS})
    comm = kernel.open_comm(INTERVAL_MS)
    kernel.run("x = [1, 2, 3]")
    comm.wait_for("inventory", 2)
    # the cell's closing sample: not busy, sent once
    closing = comm.wait_for("sample", 1)[-1]
    assert closing["busy"] is False
    since = quiet_from_now(kernel, comm)
    kernel.pump(8.0)  # 32 sampler periods
    assert iopub_after(kernel, since) == []
    # the sampler thread still reads (it would speak on a change): it skipped every period
    skipped = kernel.evaluate(
        n="__import__('sys').modules['_jupyterlab_gpu_hygiene_agent']._agent.quiet.skipped"
    )["n"]
    assert skipped >= 20, skipped


def test_while_a_cell_runs_samples_flow_and_the_first_idle_one_says_it_ended(new_kernel):
    kernel = new_kernel()
    kernel.inject({"sampleIntervalMs": INTERVAL_MS})
    comm = kernel.open_comm(INTERVAL_MS)
    n = len(comm.messages("sample"))
    busy = comm.busy_samples(2.0)
    assert len(busy) >= 5, busy
    after = comm.wait_for("sample", n + len(busy) + 1)[n + len(busy) :]
    assert after[0]["busy"] is False
    since = quiet_from_now(kernel, comm)
    kernel.pump(3.0)
    assert iopub_after(kernel, since) == []


def test_a_thread_that_allocates_between_cells_is_reported_once_per_change(new_kernel):
    kernel = new_kernel()
    kernel.inject({"sampleIntervalMs": INTERVAL_MS})
    comm = kernel.open_comm(INTERVAL_MS)
    # a thread started by the cell grows the kernel's memory by 64 MiB 2 s after the cell ended
    kernel.run(
        "import threading\n"
        "_held = []\n"
        "threading.Timer(2.0, lambda: _held.append(bytearray(64 << 20))).start()"
    )
    since = quiet_from_now(kernel, comm, settle=0.8)
    n = len(comm.messages("sample"))
    before = comm.messages("sample")[-1]
    kernel.pump(5.0)
    assert iopub_after(kernel, since) == ["comm_msg"]  # one message: the change, nothing else
    (grown,) = comm.messages("sample")[n:]
    assert grown["busy"] is False
    assert grown["ram"]["rss"] - before["ram"]["rss"] >= 60 << 20


def test_a_child_process_that_exits_between_cells_is_reported_once(new_kernel):
    kernel = new_kernel()
    kernel.inject({"sampleIntervalMs": INTERVAL_MS})
    comm = kernel.open_comm(INTERVAL_MS)
    # a worker-like child that exits 2 s after the cell, reaped by a thread as a pool's is
    kernel.run(
        "import subprocess, sys, threading\n"
        "_p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(2)'])\n"
        "threading.Thread(target=_p.wait, daemon=True).start()"
    )
    pid = kernel.evaluate(pid="_p.pid")["pid"]
    since = quiet_from_now(kernel, comm, settle=0.8)
    closing = comm.messages("sample")[-1]
    assert closing["busy"] is False and pid in closing["children"]
    n = len(comm.messages("sample"))
    kernel.pump(5.0)
    assert iopub_after(kernel, since) == ["comm_msg"]
    (gone,) = comm.messages("sample")[n:]
    assert pid not in gone["children"] and gone["busy"] is False


def test_a_sample_request_is_answered_at_once_and_only_on_its_comm(new_kernel):
    kernel = new_kernel()
    kernel.inject({"sampleIntervalMs": INTERVAL_MS})
    comm = kernel.open_comm(INTERVAL_MS)
    other = kernel.open_comm(INTERVAL_MS)
    quiet_from_now(kernel, comm)
    n_other = len(other.messages("sample"))
    sample = comm.request_sample(timeout=5)
    assert sample["type"] == "sample" and sample["protocol"] == PROTOCOL
    assert sample["busy"] is False
    kernel.pump(0.5)
    assert len(other.messages("sample")) == n_other
    assert comm.messages("error") == []


def test_configure_does_not_make_an_idle_kernel_speak(new_kernel):
    """The page re-sends ``configure`` when a setting changes (a user's action); the agent
    takes it without a sample when nothing changed."""
    kernel = new_kernel()
    kernel.inject({"sampleIntervalMs": 1000})
    comm = kernel.open_comm(1000)
    quiet_from_now(kernel, comm, settle=1.5)
    n = len(comm.messages("sample"))
    comm.send({"protocol": PROTOCOL, "type": "configure", "sampleIntervalMs": INTERVAL_MS})
    kernel.pump(2.0)
    assert len(comm.messages("sample")) == n
    assert comm.messages("error") == []
