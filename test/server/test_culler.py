"""The culler never shuts down a kernel whose cell runs (``metrics.py``, issue 46, item 1).

``--GpuHygieneMetrics.cull_idle_holding=True`` shuts down kernels idle at least
``idle_minutes`` that hold VRAM. With ipykernel 7, a control-channel request
(``list_subshell_request``, ``usage_request``: what kernel-usage panels send,
``create_subshell_request``) or a comm on a subshell (JupyterLab 4.4 sends comms over subshells)
publishes ``status: busy`` then ``idle`` while the main shell still runs a cell, and
jupyter_server's ``execution_state`` reads ``idle`` mid-cell. Busy means: an execute request
without its ``idle`` yet, whatever that state says.

- In a real server whose NVML is the fake of ``test/agent/fake_nvml`` (both kernels hold
  200 MiB), with a real ipykernel 7 that runs ``time.sleep(...)``: each of those requests,
  sent with jupyter_client on the kernel's own channels, makes the server's state say ``idle``
  (checked: the hostile condition is real), and still the kernel is neither flagged by
  ``kernel_idle_holding_vram`` nor shut down; the idle kernel beside it is, and so is this
  one once its cell has ended.
- In-process, with a real kernel started by jupyter_client's ``AsyncIOLoopKernelManager`` (the
  class jupyter_server's kernels are): a cell that began before the watch, whose state a
  control request already turned to ``idle``, counts as running until the main shell answers;
  the culler's last look (the main shell's ``kernel_info_request``) keeps such a kernel.
"""

import asyncio
import os
import time
import uuid

import pytest
from test_metrics import CHATTER, MiB, fake_nvml, samples, scrape
from test_server_extension import ROOT, jupyter_env, start_with_kernels, stop_and_reap

from jupyterlab_gpu_hygiene.metrics import (
    ExecutionActivity,
    GpuHygieneMetrics,
    Nvml,
    cull_idle_holding,
)

pytestmark = pytest.mark.timeout(180)

# the comm target the subshell's comm opens (registered before the long cell starts)
TARGET = """
get_ipython().kernel.comm_manager.register_target(
    "gpu-hygiene-test-echo", lambda comm, msg: comm.send({"echo": msg["content"]["data"]})
)
"""


def control(client, msg_type, content=None):
    """Send ``msg_type`` on the control channel; its reply (a dict)."""
    msg = client.session.msg(msg_type, content or {})
    client.control_channel.send(msg)
    deadline = time.monotonic() + 30
    while True:
        reply = client.get_control_msg(timeout=max(0.1, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            return reply


def comm_on_subshell(client, subshell_id):
    """Open a comm on the subshell ``subshell_id``, as JupyterLab 4.4 sends comms."""
    msg = client.session.msg(
        "comm_open",
        {"comm_id": uuid.uuid4().hex, "target_name": "gpu-hygiene-test-echo", "data": {"a": 1}},
    )
    msg["header"]["subshell_id"] = subshell_id
    client.shell_channel.send(msg)


def server_state(server, kernel_id):
    status, model = server.get(f"api/kernels/{kernel_id}")
    assert status == 200, model
    return model["execution_state"]


def wait_for_state(server, kernel_id, state, seconds=5.0):
    deadline = time.monotonic() + seconds
    while server_state(server, kernel_id) != state:
        assert time.monotonic() < deadline, f"the server never said {state}"
        time.sleep(0.05)


def test_a_running_cell_is_never_culled_whatever_control_or_subshell_traffic_says(tmp_path):
    """The culler looks every second for kernels idle 3 s holding 100 MiB. The plain kernel
    runs ``time.sleep(40)``; meanwhile each hostile request turns the server's state to
    ``idle`` and, 4 s later (idle threshold + cull interval), the kernel is still there, not
    flagged, idle 0 s and ``busy`` in the scrape. The session's kernel, idle, is culled
    meanwhile (the culler works); the sleeping one is culled once its cell ended."""
    from jupyter_client import BlockingKernelClient

    env = jupyter_env(tmp_path)
    config = tmp_path / "nvml.json"
    fake_nvml(config, {})
    fake_dir = ROOT / "test" / "agent" / "fake_nvml"
    env["PYTHONPATH"] = os.pathsep.join([str(fake_dir), env["PYTHONPATH"]])
    env["FAKE_NVML_CONFIG"] = str(config)
    server = start_with_kernels(
        tmp_path,
        "culler-busy",
        "--GpuHygieneMetrics.cull_idle_holding=True",
        "--GpuHygieneMetrics.cull_interval_s=1",
        "--GpuHygieneMetrics.idle_minutes=0.05",
        "--GpuHygieneMetrics.idle_min_mib=100",
        env=env,
    )
    idle_id, busy_id = server.session["kernel"]["id"], server.plain["id"]
    client = BlockingKernelClient()
    pids = []
    try:
        status, answer = server.get("gpu-hygiene/kernels")
        assert status == 200
        pids = [k["pid"] for k in answer["kernels"]]
        client.load_connection_file(str(server.info / f"kernel-{busy_id}.json"))
        client.start_channels()
        client.wait_for_ready(timeout=60)
        reply = client.execute_interactive(TARGET + CHATTER, timeout=30)
        assert reply["content"]["status"] == "ok"
        started = time.monotonic()
        cell = client.execute("import time; time.sleep(40)")
        wait_for_state(server, busy_id, "busy")
        fake_nvml(config, {pid: 200 * MiB for pid in pids})

        def listed():
            return {k["id"] for k in server.get("api/kernels")[1]}

        def still_running_and_kept(what):
            time.sleep(4.0)  # 3 s idle threshold, then a cull every second
            assert busy_id in listed(), f"culled mid-cell after {what}"
            found = samples(scrape(server)[1])
            flagged = {lab["kernel_id"]: v for lab, v in found["kernel_idle_holding_vram"]}
            assert flagged[busy_id] == 0, what
            idle = {lab["kernel_id"]: v for lab, v in found["kernel_idle_seconds"]}
            assert idle[busy_id] == 0, what
            states = {lab["kernel_id"]: lab["execution_state"] for lab, _ in found["kernel_info"]}
            assert states[busy_id] == "busy", what
            vram = {lab["kernel_id"]: v for lab, v in found["kernel_vram_bytes"]}
            assert vram[busy_id] == 200 * MiB  # it holds VRAM: only its cell keeps it

        assert control(client, "list_subshell_request")["content"]["status"] == "ok"
        wait_for_state(server, busy_id, "idle")  # the server's state is wrong from here
        still_running_and_kept("list_subshell_request")
        while idle_id in listed():  # the idle kernel beside it is culled meanwhile
            assert time.monotonic() - started < 20, server.log.read_text()[-3000:]
            time.sleep(0.2)
        assert busy_id in listed()

        assert control(client, "usage_request")["msg_type"] == "usage_reply"
        wait_for_state(server, busy_id, "idle")
        still_running_and_kept("usage_request")

        created = control(client, "create_subshell_request")["content"]
        assert created["status"] == "ok", created
        wait_for_state(server, busy_id, "idle")
        comm_on_subshell(client, created["subshell_id"])
        still_running_and_kept("create_subshell_request and a comm on the subshell")
        assert server_state(server, busy_id) == "idle"
        assert time.monotonic() - started < 38, "the cell must still run for the checks"

        deadline = time.monotonic() + 30
        while True:  # the cell's reply: it ran to its end
            reply = client.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
            if reply["parent_header"].get("msg_id") == cell:
                break
        assert reply["content"]["status"] == "ok"
        ended = time.monotonic()
        while busy_id in listed():  # idle now, holding VRAM: culled
            assert time.monotonic() - ended < 30, server.log.read_text()[-3000:]
            time.sleep(0.5)
        log = server.log.read_text()
        assert f"culling kernel {busy_id}: idle " in log
        assert f"culling kernel {idle_id}: idle " in log
    finally:
        client.stop_channels()
        stop_and_reap([server], pids)


class FakeNvml:
    """One GPU on which the pids of ``pids`` hold 200 MiB each."""

    def __init__(self, pids):
        self.pids = pids

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetMigMode(self, handle):
        raise RuntimeError("not MIG-capable")

    def nvmlDeviceGetUUID(self, handle):
        return "GPU-fake"

    def nvmlDeviceGetMemoryInfo(self, handle):
        from types import SimpleNamespace

        return SimpleNamespace(total=80 * 2**30, used=2**30)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        from types import SimpleNamespace

        return [SimpleNamespace(pid=pid, usedGpuMemory=200 * MiB) for pid in self.pids]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        return []


class OneKernel:
    """The parts of jupyter_server's kernel manager the watch and the culler use, around one
    real kernel (``AsyncIOLoopKernelManager``), whose ``execution_state`` the test sets as
    jupyter_server's would read."""

    def __init__(self, km, kernel_id):
        self.km = km
        self.kernel_id = kernel_id
        km.execution_state = "idle"
        self.shut_down = []

    def get_kernel(self, kernel_id):
        if kernel_id != self.kernel_id or self.shut_down:
            raise KeyError(kernel_id)
        return self.km

    def list_kernel_ids(self):
        return [] if self.shut_down else [self.kernel_id]

    def list_kernels(self):
        if self.shut_down:
            return []
        return [
            {
                "id": self.kernel_id,
                "name": "python3",
                "execution_state": self.km.execution_state,
                "last_activity": None,
                "connections": 0,
            }
        ]

    async def shutdown_kernel(self, kernel_id):
        self.shut_down.append(kernel_id)


class Log:
    def __init__(self):
        self.lines = []

    def info(self, text, *args):
        self.lines.append(text % args)

    warning = info


async def _a_cell_that_began_before_the_watch():
    from jupyter_client import BlockingKernelClient
    from jupyter_client.ioloop import AsyncIOLoopKernelManager

    km = AsyncIOLoopKernelManager(kernel_name="python3")
    await km.start_kernel()
    client = BlockingKernelClient()  # threaded channels: waited for off the event loop
    client.load_connection_info(km.get_connection_info())
    client.start_channels()
    try:
        await asyncio.to_thread(client.wait_for_ready, timeout=60)
        manager = OneKernel(km, "k1")
        pid = km.provisioner.process.pid
        settings = GpuHygieneMetrics(idle_minutes=0.0, idle_min_mib=100)
        nvml = Nvml(FakeNvml([pid]))
        log = Log()
        cell = client.execute("import time; time.sleep(8)")
        await asyncio.sleep(1.0)
        # a usage_request answered mid-cell: jupyter_server's state would now say idle
        usage = client.session.msg("usage_request", {})
        client.control_channel.send(usage)
        reply = await asyncio.to_thread(client.get_control_msg, timeout=10)
        assert reply["msg_type"] == "usage_reply"
        activity = ExecutionActivity()
        activity.watch(manager, ["k1"])  # the watch begins mid-cell
        await asyncio.sleep(1.0)
        assert activity.executing("k1")  # the main shell has not answered: a cell runs
        assert await cull_idle_holding(manager, nvml, settings, activity, log) == []
        # without the watch's knowledge, the culler's last look keeps it all the same
        blind = ExecutionActivity()
        blind.watch(manager, ["k1"])
        blind._watched["k1"].running.clear()  # as if the watch had missed the cell
        assert not blind.executing("k1")
        started = time.monotonic()
        assert await cull_idle_holding(manager, nvml, settings, blind, log) == []
        assert time.monotonic() - started >= 4.0  # it waited for the main shell
        assert any("did not answer" in line for line in log.lines), log.lines
        assert manager.shut_down == []
        while True:  # the cell ends
            reply = await asyncio.to_thread(client.get_shell_msg, timeout=30)
            if reply["parent_header"].get("msg_id") == cell:
                break
        deadline = time.monotonic() + 10
        while activity.executing("k1"):
            assert time.monotonic() < deadline, "the watch never saw the main shell answer"
            await asyncio.sleep(0.05)
        assert await cull_idle_holding(manager, nvml, settings, activity, log) == ["k1"]
        blind.forget("k1")
    finally:
        client.stop_channels()
        await km.shutdown_kernel(now=True)


def test_a_cell_that_began_before_the_watch_keeps_its_kernel():
    asyncio.run(_a_cell_that_began_before_the_watch())
