"""The ``gpuProcesses`` fact (issue 12): who else is on the kernel's GPUs.

This machine has no GPU, so NVML (and only NVML) is a fake: ``fake_nvml/pynvml.py``, loaded
in process under a private name for the unit tests, and first on ``PYTHONPATH`` for the real
kernels (a JSON file, ``FAKE_NVML_CONFIG``, holds the devices; the test rewrites it to change
the list). Everything else is real: ``/proc``, a real ``sleep`` process on the fake GPU, the
kernel's own pid, ipykernel. Not tested here: a real driver's graphics list and MIG devices
(the fake emulates the calls the agent makes; see docs/protocol.md).
"""

import importlib.util
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from conftest import load_agent

pytestmark = pytest.mark.timeout(120)

MiB = 1 << 20
FAKE_DIR = Path(__file__).resolve().parent / "fake_nvml"
MISSING_PID = 2**22 + 12345  # above Linux's pid_max limit (4194304): exists nowhere


@pytest.fixture(scope="module")
def agent():
    return load_agent("_gpu_hygiene_agent_gpuprocs")


@pytest.fixture
def fake_nvml(monkeypatch):
    """The fake pynvml module, as ``pynvml`` in ``sys.modules`` for this test only."""
    spec = importlib.util.spec_from_file_location("_fake_pynvml", FAKE_DIR / "pynvml.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.delenv("FAKE_NVML_CONFIG", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


@pytest.fixture
def sleeper():
    """A real other process of this OS (pid), once it runs ``sleep``."""
    proc = subprocess.Popen(["sleep", "300"])
    wait_exec(proc.pid, "sleep")
    yield proc.pid
    proc.kill()
    proc.wait()


def wait_exec(pid, comm, timeout=10):
    """Wait until ``pid`` runs the program ``comm`` (its exec() is done)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                return
        except OSError:
            pass
        time.sleep(0.01)
    raise AssertionError(f"{pid} does not run {comm}")


def device(compute=(), graphics=(), used=4096 * MiB, **extra):
    return {
        "name": "Fake GPU",
        "uuid": "GPU-fake-0",
        "total": 80 * 1024 * MiB,
        "used": used,
        "compute": list(compute),
        "graphics": list(graphics),
        "migMode": 0,
        **extra,
    }


def proc(pid, used):
    return {"pid": pid, "used": used}


def started(agent, fake_nvml, config, env=None, monkeypatch=None):
    fake_nvml.set_config(config)
    if env is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", env)
    sampler = agent.devices.DeviceSampler()
    sampler.start()
    assert sampler.nvml is fake_nvml, sampler.nvml_error
    return sampler


class Clock:
    """A ``time`` stand-in for devices.py: ``monotonic`` moves only when told."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


# ---- merging the lists (pure)


def test_merge_by_pid_kinds_sums_and_order(agent):
    P = agent.devices.ProcessUse
    rows = agent.gpuprocs.merge(
        [P(10, 100), P(11, None), P(12, 50), P(12, 70), P(13, 5)],
        [P(12, 100), P(14, 300), P(13, None), P(15, None)],
    )
    assert rows == [
        (14, "graphics", 300),
        (12, "both", 120),  # 50 + 70 in the compute list (two MIG instances); max with 100
        (10, "compute", 100),
        (13, "both", 5),  # the known figure of the two
        (11, "compute", None),  # not reported: last, by pid
        (15, "graphics", None),
    ]
    # one entry of a pid with None in a list makes its sum unknown
    assert agent.gpuprocs.merge([P(1, 5), P(1, None)], []) == [(1, "compute", None)]
    many = [P(pid, pid) for pid in range(1, 101)]
    cut = agent.gpuprocs.merge(many, [])
    assert len(cut) == agent.gpuprocs.MAX_PROCESSES == 64
    assert cut[0] == (100, "compute", 100) and cut[-1][0] == 37


@pytest.mark.parametrize(
    ("own", "hidden", "others", "expected"),
    [
        (True, False, False, "host"),  # NVML lists the kernel: its pids are ours
        (True, True, None, "host"),
        (False, True, True, "container"),  # torch reserves memory, NVML does not list us
        (False, False, False, "container"),  # none of NVML's pids exists here
        (False, False, True, "host"),
        (False, False, None, "unknown"),  # no /proc, no psutil
    ],
)
def test_namespace_decision(agent, own, hidden, others, expected):
    assert agent.gpuprocs.decide_namespace(own, hidden, others) == expected


# ---- names from /proc, from psutil, from nothing


def test_process_reader_through_proc(agent, sleeper):
    reader = agent.gpuprocs.ProcessReader()
    assert reader.source == "proc"
    assert reader.exists(sleeper) is True and reader.exists(MISSING_PID) is False
    name, cmdline, user = reader.describe(sleeper)
    assert (name, cmdline) == ("sleep", "sleep 300")
    import pwd

    assert user == pwd.getpwuid(os.getuid()).pw_name
    assert reader.describe(MISSING_PID) == (None, None, None)
    # a long command line is cut to 200 characters
    script = "import time; time.sleep(300)"
    long = subprocess.Popen([sys.executable, "-c", script, *(["x" * 50] * 10)])
    try:
        time.sleep(0.5)
        _name, cmdline, _user = reader.describe(long.pid)
        assert len(cmdline) == 200 and cmdline.startswith(f"{sys.executable} -c {script} xxx")
        assert cmdline.endswith("x\u2026")
    finally:
        long.kill()
        long.wait()


def test_process_reader_through_psutil_and_neither(agent, tmp_path, monkeypatch, sleeper):
    psutil = pytest.importorskip("psutil")
    reader = agent.gpuprocs.ProcessReader(proc=str(tmp_path / "no-proc"))
    assert reader.source == "psutil"
    assert reader.exists(sleeper) is True and reader.exists(MISSING_PID) is False
    assert reader.describe(sleeper)[:2] == ("sleep", "sleep 300")
    assert reader.describe(sleeper)[2] == psutil.Process(sleeper).username()
    assert reader.describe(MISSING_PID) == (None, None, None)
    monkeypatch.setitem(sys.modules, "psutil", None)  # "import psutil" fails
    bare = agent.gpuprocs.ProcessReader(proc=str(tmp_path / "no-proc"))
    assert bare.source is None
    assert bare.exists(sleeper) is None and bare.describe(sleeper) == (None, None, None)


# ---- the message from a fake sampler (pure timing and change rules)


class FakeSampler:
    def __init__(self, agent, rows, hidden=None):
        self.agent = agent
        self.rows = rows  # {index: (compute, graphics)}
        self.hidden = hidden or {}
        self.reads = 0

    def process_lists(self, on_error=None):
        self.reads += 1
        PL, P = self.agent.devices.ProcessLists, self.agent.devices.ProcessUse
        return [
            PL(i, [P(*c) for c in compute], [P(*g) for g in graphics])
            for i, (compute, graphics) in sorted(self.rows.items())
        ]


def test_poll_sends_on_change_force_and_resend(agent, sleeper, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(
        agent.gpuprocs, "time", types.SimpleNamespace(monotonic=clock.monotonic, time=time.time)
    )
    me = os.getpid()
    sampler = FakeSampler(agent, {0: ([(me, 700 * MiB), (sleeper, 100 * MiB)], [(sleeper, 1)])})
    poller = agent.gpuprocs.GpuProcesses(me)
    first = poller.poll(sampler)
    assert first["type"] == "gpuProcesses" and first["protocol"] == 2 and first["pid"] == me
    assert first["namespace"] == "host"
    (dev,) = first["devices"]
    assert dev["index"] == 0
    mine, other = dev["processes"]
    assert mine == {
        "pid": me,
        "kind": "compute",
        "used": 700 * MiB,
        "name": mine["name"],
        "cmdline": mine["cmdline"],
        "user": mine["user"],
        "self": True,
    }
    assert mine["name"] and mine["user"] and "python" in mine["cmdline"]
    assert other["kind"] == "both" and other["name"] == "sleep" and other["self"] is False
    clock.now += 2
    assert poller.poll(sampler) is None  # unchanged
    sampler.rows[0][0][1] = (sleeper, 100 * MiB + MiB // 4)  # under half a MiB: "unchanged"
    clock.now += 2
    assert poller.poll(sampler) is None
    poller.force = True  # a comm opened
    assert poller.poll(sampler) is not None and poller.force is False
    clock.now += 2
    sampler.rows[0][0][1] = (sleeper, 102 * MiB)
    changed = poller.poll(sampler)
    assert changed["devices"][0]["processes"][1]["used"] == 102 * MiB
    clock.now += 9.9
    assert poller.poll(sampler) is None
    clock.now += 0.1
    assert poller.poll(sampler) is not None  # 10 s since the last message
    sampler.hidden = {0: True}  # the kernel's usage hidden: a change, and "container"
    clock.now += 2
    hidden = poller.poll(sampler)
    assert hidden["namespace"] == "host"  # ...unless NVML lists the kernel itself
    sampler.rows[0] = ([(sleeper, 100 * MiB)], [])
    clock.now += 2
    hidden = poller.poll(sampler)
    assert hidden["namespace"] == "container"
    assert hidden["devices"][0]["processes"][0]["name"] is None  # not this OS's pid


def test_poll_namespace_from_pids_that_do_not_exist(agent):
    sampler = FakeSampler(agent, {0: ([(MISSING_PID, 5 * MiB), (MISSING_PID + 1, None)], [])})
    message = agent.gpuprocs.GpuProcesses(os.getpid()).poll(sampler)
    assert message["namespace"] == "container"
    assert all(
        p["name"] is None and p["cmdline"] is None and p["user"] is None and p["self"] is False
        for p in message["devices"][0]["processes"]
    )
    empty = agent.gpuprocs.GpuProcesses(os.getpid()).poll(FakeSampler(agent, {0: ([], [])}))
    assert empty["namespace"] == "host" and empty["devices"] == [{"index": 0, "processes": []}]
    many = FakeSampler(agent, {i: ([], []) for i in range(20)})
    assert len(agent.gpuprocs.GpuProcesses(1).poll(many)["devices"]) == 16


# ---- NVML reads (devices.py) through the fake pynvml


def test_sample_reads_the_process_list_only_when_memory_moves(agent, fake_nvml, monkeypatch):
    me = "self"
    sampler = started(agent, fake_nvml, {"devices": [device([proc(me, 700 * MiB)])]})
    clock = Clock()
    monkeypatch.setattr(agent.devices, "time", clock)
    calls = fake_nvml.CALLS
    calls.clear()
    (entry,) = sampler.sample()
    assert entry["process"] == 700 * MiB and calls["nvmlDeviceGetComputeRunningProcesses"] == 1
    clock.now += 1.9
    sampler.sample()
    assert calls["nvmlDeviceGetComputeRunningProcesses"] == 1  # memory unchanged: reused
    # this kernel allocates: device memory moves, the list is read again
    config = {"devices": [device([proc(me, 900 * MiB)], used=4296 * MiB)]}
    fake_nvml.set_config(config)
    (entry,) = sampler.sample()
    assert entry["process"] == 900 * MiB and calls["nvmlDeviceGetComputeRunningProcesses"] == 2
    clock.now += 1.0
    sampler.sample()
    assert calls["nvmlDeviceGetComputeRunningProcesses"] == 2
    clock.now += 1.0  # LIST_MAX_AGE
    sampler.sample()
    assert calls["nvmlDeviceGetComputeRunningProcesses"] == 3
    # the 2 s read takes the list a sample read just now, and adds the graphics list
    lists = sampler.process_lists()
    assert calls["nvmlDeviceGetComputeRunningProcesses"] == 3
    assert calls["nvmlDeviceGetGraphicsRunningProcesses"] == 1
    assert [(p.pid, p.used) for p in lists[0].compute] == [(os.getpid(), 900 * MiB)]
    clock.now += 0.5  # LIST_REUSE_AGE
    sampler.process_lists()
    assert calls["nvmlDeviceGetComputeRunningProcesses"] == 4
    # ...and a sample after it reuses that one
    clock.now += 1.0
    sampler.sample()
    assert calls["nvmlDeviceGetComputeRunningProcesses"] == 4
    assert sampler.hidden == {0: False}


def test_graphics_not_supported_is_quiet_other_failures_reported(agent, fake_nvml):
    config = {"devices": [device([proc(7, 1)], graphicsError=fake_nvml.NVML_ERROR_NOT_SUPPORTED)]}
    sampler = started(agent, fake_nvml, config)
    errors = []
    for _ in range(3):
        (lists,) = sampler.process_lists(errors.append)
        assert lists.graphics == [] and [p.pid for p in lists.compute] == [7]
    assert errors == []
    assert fake_nvml.CALLS["nvmlDeviceGetGraphicsRunningProcesses"] == 1  # asked once
    sampler = started(agent, fake_nvml, {"devices": [device([proc(7, 1)], graphicsError=999)]})
    (lists,) = sampler.process_lists(errors.append)
    assert lists.graphics == [] and len(errors) == 1 and "999" in str(errors[0])
    # a device whose compute list fails is left out, the failure reported
    fake_nvml.set_config({"devices": []})
    assert sampler.process_lists(errors.append) == [] and len(errors) == 2


def test_sample_reads_the_utilisation_and_this_kernels_share(agent, fake_nvml):
    """Issue 29, item 4: GPU-Util and this process's SM share, as NVML gives them."""
    busy = device(
        [proc("self", 700 * MiB)],
        utilization=87,
        processUtilization=[{"pid": "self", "sm": 80}, {"pid": 4242, "sm": 7}],
    )
    sampler = started(agent, fake_nvml, {"devices": [busy]})
    errors = []
    (entry,) = sampler.sample(errors.append)
    assert (entry["utilization"], entry["processUtilization"]) == (87, 80)
    # the share costs 1.4-2.4 ms a call on an H100: within SHARE_READ_S of a read, a sample
    # carries that read's share and does not ask again (GPU-Util is read every time)
    fake_nvml.set_config({"devices": [{**busy, "processUtilization": [{"pid": 4242, "sm": 7}]}]})
    calls = fake_nvml.CALLS
    before = calls["nvmlDeviceGetProcessUtilization"]
    (entry,) = sampler.sample(errors.append)
    assert (entry["utilization"], entry["processUtilization"]) == (87, 80)
    assert calls["nvmlDeviceGetProcessUtilization"] == before
    # SHARE_READ_S later: samples of other processes only, this kernel used none of the time
    sampler._share_read.clear()
    (entry,) = sampler.sample(errors.append)
    assert (entry["utilization"], entry["processUtilization"]) == (87, 0)
    assert calls["nvmlDeviceGetProcessUtilization"] == before + 1
    # no sample since the last read (NVML's NOT_FOUND): unknown, never a made-up 0
    fake_nvml.set_config({"devices": [{**busy, "processUtilization": []}]})
    sampler._share_read.clear()
    (entry,) = sampler.sample(errors.append)
    assert (entry["utilization"], entry["processUtilization"]) == (87, None)
    assert errors == []
    # a driver without utilisation (a MIG instance): None, and not asked again
    sampler = started(agent, fake_nvml, {"devices": [device([proc("self", 1)])]})
    calls = fake_nvml.CALLS
    calls.clear()
    for _ in range(3):
        (entry,) = sampler.sample(errors.append)
        assert (entry["utilization"], entry["processUtilization"]) == (None, None)
    assert calls["nvmlDeviceGetUtilizationRates"] == 1 and errors == []


def test_no_share_where_nvml_lists_other_pids_than_the_kernels(agent, fake_nvml, monkeypatch):
    """In a container NVML's pids are of the host's namespace: torch holds memory on the device
    but NVML lists no process with the kernel's pid (``processHidden``). Its samples list other
    pids only, and "this kernel 0 %" would be made up: the share is None. (No CUDA here: torch's
    allocator is faked, the way a kernel that allocated would answer.)"""
    host = device(
        [proc(4242, 900 * MiB)],
        utilization=95,
        processUtilization=[{"pid": 4242, "sm": 93}],
    )
    sampler = started(agent, fake_nvml, {"devices": [host]})
    cuda = types.SimpleNamespace(device_count=lambda: 1)
    monkeypatch.setattr(agent.devices, "torch_module", lambda: types.SimpleNamespace(cuda=cuda))
    monkeypatch.setattr(agent.devices, "cuda_initialized", lambda torch: True)
    monkeypatch.setattr(agent.devices, "allocated_reserved", lambda torch, i: (MiB, 2 * MiB))
    monkeypatch.setattr(agent.devices, "allocator_limit", lambda torch, i, totals: None)
    (entry,) = sampler.sample()
    assert entry["processHidden"] is True and entry["process"] is None
    assert (entry["utilization"], entry["processUtilization"]) == (95, None)


MIG_GPU = {
    "name": "Fake A100",
    "uuid": "GPU-aaaa",
    "total": 40 * 1024 * MiB,
    "used": 0,
    "migMode": 1,
    "compute": [],  # the GPU's own handle: only privileged callers get a list
    "mig": [
        {
            "name": "Fake A100 MIG 3g.20gb",
            "uuid": "MIG-1111",
            "total": 20 * 1024 * MiB,
            "used": 900 * MiB,
            "compute": [proc("self", 800 * MiB)],
        },
        {
            "name": "Fake A100 MIG 3g.20gb",
            "uuid": "MIG-2222",
            "total": 20 * 1024 * MiB,
            "used": 300 * MiB,
            "compute": [proc(4242, 300 * MiB)],
            "graphics": [proc(4242, 300 * MiB)],
        },
    ],
}


def test_mig_whole_gpu_reads_each_instance(agent, fake_nvml, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    sampler = started(agent, fake_nvml, {"devices": [MIG_GPU, device([proc(5, 1)])]})
    assert [(d.index, d.nvml_index, d.mig, len(d.mig_handles)) for d in sampler.devices] == [
        (0, 0, False, 2),
        (1, 1, False, 0),
    ]
    (mig, plain) = sampler.process_lists()
    assert [p.pid for p in plain.compute] == [5]
    assert [p.pid for p in mig.compute] == [os.getpid(), 4242]
    assert [p.pid for p in mig.graphics] == [4242]
    assert sampler.sample()[0]["process"] == 800 * MiB


def test_mig_instance_named_in_cuda_visible_devices(agent, fake_nvml, monkeypatch):
    config = {"devices": [device(uuid="GPU-zzzz"), MIG_GPU]}
    sampler = started(agent, fake_nvml, config, env="MIG-2222", monkeypatch=monkeypatch)
    assert sampler.describe() == [
        {
            "index": 0,
            "nvmlIndex": 1,
            "name": "Fake A100 MIG 3g.20gb",
            "total": 20 * 1024 * MiB,
            "uuid": "MIG-2222",
        }
    ]
    (entry,) = sampler.sample()
    assert (entry["used"], entry["total"], entry["process"]) == (300 * MiB, 20 * 1024 * MiB, 0)
    (lists,) = sampler.process_lists()
    rows = agent.gpuprocs.merge(lists.compute, lists.graphics)
    assert rows == [(4242, "both", 300 * MiB)]


MIG_UUIDS = [(1, 0, "MIG-1111-aaaa"), (1, 1, "MIG-2222-bbbb")]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (None, [(0, None), (1, None)]),
        ("MIG-2222", [(1, 1)]),
        ("MIG-1111-aaaa,0", [(1, 0), (0, None)]),
        ("MIG-", []),  # ambiguous
        ("MIG-9", []),
        ("MIG-1111,MIG-1111-aaaa", [(1, 0)]),  # repeated
        ("GPU-bbbb", [(1, None)]),
    ],
)
def test_cuda_visible_targets_with_mig(agent, env, expected):
    uuids = ["GPU-aaaa", "GPU-bbbb"]
    assert agent.visible.cuda_visible_targets(env, uuids, MIG_UUIDS) == expected


# ---- the sampler thread's two rates


def test_sampler_thread_runs_the_slow_task_at_its_own_rate(agent):
    owner = object()
    for interval_ms, seconds, slow_expected, ticks_expected in (
        (250, 2.3, (2, 2), (8, 11)),
        (3000, 4.3, (3, 3), (2, 2)),
    ):
        ticks, slows = [], []
        thread = agent.sampler.SamplerThread(
            owner, lambda t=ticks: t.append(time.monotonic()), lambda s=slows: s.append(1)
        )
        thread.interval_ms = interval_ms
        thread.ensure()
        time.sleep(seconds)
        thread.stop()
        assert slow_expected[0] <= len(slows) <= slow_expected[1], (interval_ms, len(slows))
        assert ticks_expected[0] <= len(ticks) <= ticks_expected[1], (interval_ms, len(ticks))
    # a slow task with nothing to do (False) runs again at the next tick
    calls = []
    thread = agent.sampler.SamplerThread(owner, lambda: None, lambda: calls.append(1) or False)
    thread.interval_ms = 250
    thread.ensure()
    time.sleep(1.1)
    thread.stop()
    assert len(calls) >= 4
    assert not thread.thread.is_alive()


# ---- in a real kernel, with the fake NVML


class FakeConfig:
    """The JSON file the kernel's fake pynvml reads (rewritten atomically)."""

    def __init__(self, path):
        self.path = path

    def write(self, compute=(), graphics=()):
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"devices": [device(compute, graphics)]}))
        os.replace(tmp, self.path)

    def env(self):
        paths = [str(FAKE_DIR), os.environ.get("PYTHONPATH", "")]
        return {
            "PYTHONPATH": os.pathsep.join(p for p in paths if p),
            "FAKE_NVML_CONFIG": str(self.path),
        }


def gpu_processes(comm):
    return comm.messages("gpuProcesses")


def wait_count(kernel, comm, count, timeout):
    deadline = time.monotonic() + timeout
    while len(gpu_processes(comm)) < count and time.monotonic() < deadline:
        kernel.pump(0.1)
    return gpu_processes(comm)


@pytest.mark.timeout(180)
def test_gpu_processes_in_a_real_kernel(new_kernel, tmp_path, sleeper):
    config = FakeConfig(tmp_path / "nvml.json")
    config.write(
        compute=[proc("self", 700 * MiB), proc(sleeper, 2000 * MiB), proc(MISSING_PID, 5 * MiB)],
        graphics=[proc(sleeper, 2000 * MiB)],
    )
    kernel = new_kernel(env=config.env())
    names = "sorted(k for k in get_ipython().user_ns if not k.startswith('_'))"
    before = kernel.evaluate(names=names)["names"]
    kernel.inject()
    opened = time.monotonic()
    comm = kernel.open_comm(1000)
    (first,) = comm.wait_for("gpuProcesses", 1, timeout=3.5)
    assert time.monotonic() - opened < 3.5
    hello = comm.messages("hello")[0]
    assert hello["nvml"] is True and hello["agentVersion"] == "0.16.0"
    assert set(first) == {"protocol", "type", "t", "pid", "namespace", "devices"}
    assert first["pid"] == hello["pid"] and first["namespace"] == "host"
    assert abs(first["t"] - time.time()) < 5
    (dev,) = first["devices"]
    assert dev["index"] == 0
    by_pid = {p["pid"]: p for p in dev["processes"]}
    assert [p["pid"] for p in dev["processes"]] == [sleeper, hello["pid"], MISSING_PID]
    assert by_pid[sleeper] == {
        "pid": sleeper,
        "kind": "both",
        "used": 2000 * MiB,
        "name": "sleep",
        "cmdline": "sleep 300",
        "user": by_pid[sleeper]["user"],
        "self": False,
    }
    import pwd

    assert by_pid[sleeper]["user"] == pwd.getpwuid(os.getuid()).pw_name
    mine = by_pid[hello["pid"]]
    assert mine["self"] is True and mine["kind"] == "compute" and mine["used"] == 700 * MiB
    assert "ipykernel" in mine["cmdline"]
    assert by_pid[MISSING_PID]["name"] is None and by_pid[MISSING_PID]["self"] is False
    sample = comm.wait_for("sample", 1)[-1]
    assert sample["devices"][0]["process"] == 700 * MiB

    # user cells: nothing printed, nothing raised; one fresh list after them (the next 2 s read)
    for _ in range(3):
        result = kernel.run("x = 1")
        assert result.reply["status"] == "ok" and result.outputs == []
    assert len(wait_count(kernel, comm, 2, timeout=3.5)) == 2
    assert gpu_processes(comm)[1]["devices"] == first["devices"]

    # between cells (issue 40): no resend, and the other processes' memory, which moves
    # without this kernel, is not even read (the server extension reads it); the kernel's own
    # usage is unchanged, so no sample either
    reads = "__import__('pynvml').CALLS['nvmlDeviceGetGraphicsRunningProcesses']"
    reads_before = kernel.evaluate(n=reads)["n"]
    config.write(compute=[proc("self", 700 * MiB), proc(sleeper, 3000 * MiB)])
    samples_before = len(comm.messages("sample"))
    idle_from = time.monotonic()
    while time.monotonic() - idle_from < 11.0:
        kernel.pump(0.2)
    assert len(gpu_processes(comm)) == 2
    assert kernel.evaluate(n=reads)["n"] == reads_before
    assert len(comm.messages("sample")) == samples_before

    # while a cell runs: the change is sent at the next read (within 2 s)
    kernel.run("__import__('time').sleep(2.5)")
    messages = wait_count(kernel, comm, 3, timeout=3.5)
    assert [(p["pid"], p["kind"], p["used"]) for p in messages[2]["devices"][0]["processes"]] == [
        (sleeper, "compute", 3000 * MiB),
        (hello["pid"], "compute", 700 * MiB),
    ]

    # none of NVML's pids exists here: another pid namespace (seen after the next cell)
    config.write(compute=[proc(MISSING_PID, 100 * MiB), proc(MISSING_PID + 7, 200 * MiB)])
    count = len(wait_count(kernel, comm, 4, timeout=3.5))  # the list after the sleep cell
    assert kernel.run("z = 3").outputs == []
    messages = wait_count(kernel, comm, count + 1, timeout=3.5)
    assert messages[-1]["namespace"] == "container"
    assert all(p["name"] is None for p in messages[-1]["devices"][0]["processes"])
    assert kernel.run("y = 2").outputs == []
    assert comm.messages("error") == []
    assert kernel.evaluate(names=names)["names"] == sorted([*before, "x", "y", "z"])


def test_no_gpu_processes_without_nvml(new_kernel):
    kernel = new_kernel()  # the real pynvml: no driver on this machine
    kernel.inject({"sampleIntervalMs": 250})
    comm = kernel.open_comm(250)
    assert comm.messages("hello")[0]["nvml"] is False
    assert len(comm.busy_samples(3.0)) >= 8  # 3 s of a cell: the 2 s read would have run
    assert comm.messages("gpuProcesses") == [] and comm.messages("error") == []
