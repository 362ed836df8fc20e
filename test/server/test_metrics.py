"""``GET {base_url}gpu-hygiene/metrics`` (``jupyterlab_gpu_hygiene/metrics.py``, issue 25).

- In real Jupyter servers with real kernels (CPU: no NVML here): every kernel of the server has
  its ``kernel_info`` and ``kernel_idle_seconds``, the scrape parses with
  ``prometheus_client.parser``, notebook paths appear only with
  ``--GpuHygieneMetrics.notebook_paths=True``, and a request without the token is refused.
- The findings a page reports for a kernel (``PUT .../kernels/<id>/findings``, ``findings.py``)
  come back in the scrape by kind and severity with their age; a malformed report is refused
  (400), so is one for a kernel the server does not run (404) or without the token (403).
- The culler (``--GpuHygieneMetrics.cull_idle_holding=True``) in a real server whose NVML is
  the fake of ``test/agent/fake_nvml`` (no driver here; it lists the kernels' pids with the
  amounts the test writes): an idle kernel holding VRAM is shut down, one that runs code is not,
  and the comm traffic of an open notebook does not keep a kernel from it.
- In-process, the gauges built from one NVML reading: NVML cannot exist on this machine (no
  NVIDIA driver), so ``FakeNvml`` stands in for the ``pynvml`` functions the reader calls
  (devices, a MIG slice, per-process memory); the kernel rows are shaped as
  ``server.kernels_answer`` returns them.
"""

import datetime
import json
import os
import time
import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_server_extension import (
    OPENER,
    ROOT,
    TOKEN,
    jupyter_env,
    request,
    start_with_kernels,
    stop_and_reap,
)

from jupyterlab_gpu_hygiene.findings import VALIDATOR
from jupyterlab_gpu_hygiene.metrics import (
    PREFIX,
    GpuHygieneMetrics,
    Nvml,
    exposition,
    metric_families,
)

pytestmark = pytest.mark.timeout(90)

ROUTE = "gpu-hygiene/metrics"
MiB = 2**20


def scrape(server, token=TOKEN):
    """``(status, text)`` of one scrape."""
    req = urllib.request.Request(server.base + ROUTE)
    if token:
        req.add_header("Authorization", f"token {token}")
    try:
        with OPENER.open(req, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def samples(text):
    """{metric name without the prefix: [(labels, value)]} of a scrape."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name.removeprefix(PREFIX), []).append(
                (sample.labels, sample.value)
            )
    return out


def start(tmp_path_factory, name, *args):
    """A server with a plain kernel and a session's kernel (``runs/train.ipynb``)."""
    server = start_with_kernels(tmp_path_factory.mktemp(name), name, *args)
    server.kernel_ids = {server.plain["id"], server.session["kernel"]["id"]}
    server.session_kernel = server.session["kernel"]["id"]
    return server


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """The default server, and one with notebook paths on."""
    made = []
    try:
        made.append(start(tmp_path_factory, "metrics"))
        made.append(
            start(
                tmp_path_factory,
                "metrics-paths",
                "--GpuHygieneMetrics.notebook_paths=True",
                "--GpuHygieneMetrics.idle_minutes=5",
            )
        )
        yield made
    finally:
        stop_and_reap(made, [])


def test_every_kernel_of_the_server_in_one_scrape(servers):
    server = servers[0]
    status, text = scrape(server)
    assert status == 200, text
    found = samples(text)
    info = {labels["kernel_id"]: labels for labels, value in found["kernel_info"]}
    assert set(info) == server.kernel_ids
    for labels in info.values():
        assert labels["kernel_name"] == "python3"
        assert labels["execution_state"] in {"starting", "idle", "busy"}
        assert labels["path"] == ""  # off by default: no notebook path leaves the server
    idle = {labels["kernel_id"]: value for labels, value in found["kernel_idle_seconds"]}
    assert set(idle) == server.kernel_ids
    assert all(0 <= value < 3600 for value in idle.values())
    # no NVML on this machine: said, with why; no VRAM figure made up, nobody flagged
    [(labels, available)] = found["nvml_available"]
    assert available == 0 and labels["reason"]
    assert "kernel_vram_bytes" not in found
    flagged = {labels["kernel_id"]: value for labels, value in found["kernel_idle_holding_vram"]}
    assert flagged == {kernel_id: 0 for kernel_id in server.kernel_ids}


def test_idle_seconds_grow_while_the_kernel_is_idle(servers):
    server = servers[0]

    def idle():
        found = samples(scrape(server)[1])
        return {labels["kernel_id"]: value for labels, value in found["kernel_idle_seconds"]}

    first = idle()
    time.sleep(1.5)
    later = idle()
    for kernel_id in server.kernel_ids:
        assert later[kernel_id] >= first[kernel_id] + 1.0


CHATTER = """
import threading, time
from ipykernel.comm import Comm
_chat = Comm(target_name="gpu-hygiene-test-chatter")
def _chatter():
    while True:
        _chat.send({"t": time.time()})
        time.sleep(0.2)
threading.Thread(target=_chatter, daemon=True).start()
"""


def test_idle_counts_code_runs_not_comm_traffic(servers):
    """A comm that sends from a thread every 0.2 s, as the agent's sampler does every second:
    jupyter_server's last_activity stays fresh, the kernel's idle time still grows, and running
    a cell resets it."""
    from jupyter_client import BlockingKernelClient

    server = servers[0]
    kernel_id = server.plain["id"]
    scrape(server)  # watched from here at the latest
    client = BlockingKernelClient()
    client.load_connection_file(str(server.info / f"kernel-{kernel_id}.json"))
    # without its kernel's manager the client judges the kernel by its heartbeat: 1 s of a
    # loaded machine is not death (as kernel_driver.Kernel sets it)
    client.hb_channel.time_to_dead = 10.0
    client.start_channels()
    try:
        # IOPub is a SUB socket: until it has joined, the kernel's messages are lost to it, and
        # execute_interactive then waits for an 'idle' it never sees ("Timeout waiting for
        # output" after 30 s: the flake of a fresh clone's make test on a busy machine).
        # wait_for_ready returns once a kernel_info round trip came back on IOPub too.
        client.wait_for_ready(timeout=60)
        reply = client.execute_interactive(CHATTER, timeout=30)
        assert reply["content"]["status"] == "ok"
        time.sleep(3)

        def idle():
            found = samples(scrape(server)[1])
            return {labels["kernel_id"]: v for labels, v in found["kernel_idle_seconds"]}[kernel_id]

        status, model = server.get(f"api/kernels/{kernel_id}")
        assert status == 200
        last = datetime.datetime.fromisoformat(model["last_activity"].replace("Z", "+00:00"))
        age = datetime.datetime.now(datetime.timezone.utc) - last
        assert age.total_seconds() < 1.0  # the comm's messages count there
        assert idle() >= 2.5  # not here
        reply = client.execute_interactive("1 + 1", timeout=30)
        assert reply["content"]["status"] == "ok"
        assert idle() < 1.5
    finally:
        client.stop_channels()


REPORT = {
    "staleBytes": 12 * MiB,
    "findings": [
        {"kind": "stale-model", "severity": "warning", "bytes": 12 * MiB},
        {"kind": "graph-holder", "severity": "warning", "bytes": 2048 * MiB},
        {"kind": "graph-holder", "severity": "info", "bytes": 3 * MiB},
        {"kind": "cuda-context", "severity": "info", "bytes": 518 * MiB},
    ],
}


def put_findings(server, kernel_id, body, token=TOKEN):
    return request(
        f"{server.base}gpu-hygiene/kernels/{kernel_id}/findings", "PUT", body, token=token
    )


def test_a_pages_findings_report_reaches_the_scrape(servers):
    server = servers[0]
    kernel_id = server.session_kernel
    status, _ = put_findings(server, kernel_id, REPORT)
    assert status == 204
    found = samples(scrape(server)[1])
    assert found["kernel_stale_bytes"] == [({"kernel_id": kernel_id}, 12 * MiB)]
    counts = {(lab["kind"], lab["severity"]): v for lab, v in found["kernel_findings"]}
    assert counts == {
        ("cuda-context", "info"): 1,
        ("graph-holder", "info"): 1,
        ("graph-holder", "warning"): 1,
        ("stale-model", "warning"): 1,
    }
    held = {lab["kind"]: v for lab, v in found["kernel_finding_bytes"]}
    assert held == {"cuda-context": 518 * MiB, "graph-holder": 2051 * MiB, "stale-model": 12 * MiB}
    [(labels, age)] = found["kernel_findings_age_seconds"]
    assert labels == {"kernel_id": kernel_id} and 0 <= age < 30
    # the other kernel was reported by no page: nothing said of it, not "nothing found"
    assert all(lab["kernel_id"] == kernel_id for lab, _ in found["kernel_findings"])
    # a later report replaces the earlier one
    assert put_findings(server, kernel_id, {"staleBytes": 0, "findings": []})[0] == 204
    found = samples(scrape(server)[1])
    assert found["kernel_stale_bytes"] == [({"kernel_id": kernel_id}, 0)]
    assert "kernel_findings" not in found


@pytest.mark.parametrize(
    "body",
    [
        {"findings": []},
        {"staleBytes": -1, "findings": []},
        {"staleBytes": 0, "findings": [{"kind": "Bad Kind", "severity": "info", "bytes": 1}]},
        {"staleBytes": 0, "findings": [{"kind": "x", "severity": "fatal", "bytes": 1}]},
        {"staleBytes": 0, "findings": [], "extra": 1},
        {"staleBytes": 0, "findings": [{"kind": "x", "severity": "info", "bytes": 1}] * 201},
        [1, 2],
    ],
    ids=["no staleBytes", "negative", "kind", "severity", "extra", "too many", "a list"],
)
def test_a_malformed_report_is_refused_and_keeps_the_last(servers, body):
    server = servers[1]
    kernel_id = server.session_kernel
    assert put_findings(server, kernel_id, REPORT)[0] == 204
    status, answer = put_findings(server, kernel_id, body)
    assert status == 400 and "message" in (answer or {}), answer
    found = samples(scrape(server)[1])
    assert found["kernel_stale_bytes"] == [({"kernel_id": kernel_id}, 12 * MiB)]


def test_the_browsers_reports_fit_the_schema():
    """The reports the browser's own code makes of two fixture inventories (written by
    test/unit/server-findings.spec.ts) are what the server accepts."""
    path = ROOT / "test" / "fixtures" / "findings_reports.json"
    reports = json.loads(path.read_text(encoding="utf-8"))
    assert len(reports) == 2 and any(r["findings"] for r in reports)
    for report in reports:
        assert list(VALIDATOR.iter_errors(report)) == []


def test_a_report_for_another_kernel_or_without_the_token_is_refused(servers):
    server = servers[0]
    missing = "00000000-0000-0000-0000-000000000000"
    assert put_findings(server, missing, REPORT)[0] == 404
    assert put_findings(server, server.session_kernel, REPORT, token=None)[0] == 403


def fake_nvml(path, pids):
    """The fake NVML's one device, listing ``pids`` ({pid: bytes}); written whole, atomically."""
    device = {
        "name": "Fake H100",
        "uuid": "GPU-fake-h100-0",
        "total": 80 * 2**30,
        "used": sum(pids.values()) + 512 * MiB,
        "compute": [{"pid": pid, "used": used} for pid, used in pids.items()],
        "graphics": [],
        "migMode": 0,
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"devices": [device]}))
    os.replace(tmp, path)


def test_the_culler_shuts_down_idle_kernels_that_hold_vram(tmp_path):
    """Both kernels hold 200 MiB (the fake NVML's figure for their pids); the culler looks every
    second for kernels idle 3 s holding 100 MiB. The session's kernel, idle, is shut down; the
    other one runs a cell every 0.5 s meanwhile and stays, and once it stops running code it is
    shut down too, although its comm keeps jupyter_server's last_activity fresh."""
    from jupyter_client import BlockingKernelClient

    env = jupyter_env(tmp_path)
    config = tmp_path / "nvml.json"
    fake_nvml(config, {})
    fake_dir = ROOT / "test" / "agent" / "fake_nvml"
    env["PYTHONPATH"] = os.pathsep.join([str(fake_dir), env["PYTHONPATH"]])
    env["FAKE_NVML_CONFIG"] = str(config)
    server = start_with_kernels(
        tmp_path,
        "culler",
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
        # the busy one runs code before either holds VRAM: never idle 3 s while it holds
        assert client.execute_interactive(CHATTER, timeout=30)["content"]["status"] == "ok"
        fake_nvml(config, {pid: 200 * MiB for pid in pids})

        def listed():
            return {k["id"] for k in server.get("api/kernels")[1]}

        deadline = time.monotonic() + 30
        while idle_id in listed():
            assert time.monotonic() < deadline, server.log.read_text()[-3000:]
            reply = client.execute_interactive("1 + 1", timeout=30)
            assert reply["content"]["status"] == "ok"
            time.sleep(0.5)
        assert busy_id in listed()  # it ran code every 0.5 s
        deadline = time.monotonic() + 30
        while busy_id in listed():  # now it only chatters
            assert time.monotonic() < deadline, server.log.read_text()[-3000:]
            time.sleep(0.5)
        log = server.log.read_text()
        for kernel_id in (idle_id, busy_id):
            assert f"culling kernel {kernel_id}: idle " in log
        assert "holding 200 MiB of VRAM" in log
    finally:
        client.stop_channels()
        stop_and_reap([server], pids)


def test_notebook_paths_only_when_configured(servers):
    server = servers[1]
    found = samples(scrape(server)[1])
    paths = {labels["kernel_id"]: labels["path"] for labels, _ in found["kernel_info"]}
    assert paths[server.session_kernel] == "runs/train.ipynb"
    assert sorted(paths.values()) == ["", "runs/train.ipynb"]
    # the configured threshold reaches the panel through gpu-hygiene/kernels
    status, answer = server.get("gpu-hygiene/kernels")
    assert status == 200
    assert answer["idleHolding"] == {"minutes": 5.0, "mib": 256.0}


def test_refused_without_the_token(servers):
    for token in (None, "not-the-token"):
        status, text = scrape(servers[0], token=token)
        assert status == 403
        assert PREFIX not in text


# ---- the gauges from one NVML reading (NVML faked: no driver here)


class FakeNvml:
    """The pynvml functions ``Nvml`` calls, answering for two GPUs: GPU 0 whole (kernel pid 100
    holds 3 GiB, pid 300 holds 100 MiB, another program 1 GiB), GPU 1 in MIG mode with one slice
    (pid 100 holds 512 MiB there)."""

    NVML_DEVICE_MIG_ENABLE = 1

    def __init__(self):
        self.inits = 0

    def nvmlInit(self):
        self.inits += 1

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("gpu", i)

    def nvmlDeviceGetMigMode(self, handle):
        return (1, 1) if handle == ("gpu", 1) else (0, 0)

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):
        return 2

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, j):
        if j == 1:
            raise RuntimeError("no slice at this index")
        return ("mig", 1, j)

    def nvmlDeviceGetUUID(self, handle):
        return {("gpu", 0): b"GPU-aaaa", ("mig", 1, 0): "MIG-bbbb"}[handle]

    def nvmlDeviceGetMemoryInfo(self, handle):
        if handle == ("gpu", 0):
            return SimpleNamespace(total=80 * 2**30, used=5 * 2**30)
        return SimpleNamespace(total=10 * 2**30, used=2**30)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        p = SimpleNamespace
        if handle == ("gpu", 0):
            return [
                p(pid=100, usedGpuMemory=3 * 2**30),
                p(pid=300, usedGpuMemory=100 * MiB),
                p(pid=999, usedGpuMemory=2**30),
            ]
        return [p(pid=100, usedGpuMemory=512 * MiB)]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")


def kernel(kernel_id, pid, state, idle_minutes):
    last = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=idle_minutes)
    return {
        "id": kernel_id,
        "name": "python3",
        "pid": pid,
        "executionState": state,
        "lastActivity": last.isoformat().replace("+00:00", "Z"),
        "connections": 1,
        "sessions": [],
    }


def test_vram_per_kernel_and_the_idle_flag_from_nvml():
    fake = FakeNvml()
    nvml = Nvml(fake)
    reading = nvml.read()
    assert [(d.index, d.uuid, d.mig) for d in reading.devices] == [
        ("0", "GPU-aaaa", False),
        ("1:0", "MIG-bbbb", True),
    ]
    answer = {
        "kernels": [
            kernel("idle-big", 100, "idle", 40),  # idle 40 min, 3.5 GiB: flagged
            kernel("busy", 200, "busy", 40),  # no process on the GPU, busy
            kernel("idle-small", 300, "idle", 40),  # 100 MiB: under the 256 MiB default
            kernel("remote", None, "idle", 40),  # a gateway kernel: no pid, no figure
        ]
    }
    text = exposition(metric_families(answer, reading, GpuHygieneMetrics(), time.time()))
    found = samples(text.decode())
    vram = {
        (labels["kernel_id"], labels["device"], labels["uuid"], labels["mig"]): value
        for labels, value in found["kernel_vram_bytes"]
    }
    assert vram == {
        ("idle-big", "0", "GPU-aaaa", "0"): 3 * 2**30,
        ("idle-big", "1:0", "MIG-bbbb", "1"): 512 * MiB,
        ("idle-small", "0", "GPU-aaaa", "0"): 100 * MiB,
    }
    flagged = {labels["kernel_id"]: value for labels, value in found["kernel_idle_holding_vram"]}
    assert flagged == {"idle-big": 1, "busy": 0, "idle-small": 0, "remote": 0}
    idle = {labels["kernel_id"]: value for labels, value in found["kernel_idle_seconds"]}
    assert idle["busy"] == 0
    assert 40 * 60 - 5 <= idle["idle-big"] <= 40 * 60 + 5
    totals = {labels["device"]: value for labels, value in found["device_memory_total_bytes"]}
    assert totals == {"0": 80 * 2**30, "1:0": 10 * 2**30}
    assert found["nvml_available"] == [({"reason": ""}, 1)]
    # thresholds are settings: 50 MiB and 30 min flag the small one too
    settings = GpuHygieneMetrics(idle_min_mib=50, idle_minutes=30)
    found = samples(exposition(metric_families(answer, reading, settings, time.time())).decode())
    flagged = {labels["kernel_id"]: value for labels, value in found["kernel_idle_holding_vram"]}
    assert flagged["idle-small"] == 1
    # NVML is initialised once, whatever the number of scrapes
    nvml.read()
    assert fake.inits == 1


def test_no_nvml_is_said_once_and_not_retried():
    class Broken(FakeNvml):
        def nvmlInit(self):
            self.inits += 1
            raise RuntimeError("NVML Shared Library Not Found")

    broken = Broken()
    nvml = Nvml(broken)
    first, second = nvml.read(), nvml.read()
    assert first.devices == second.devices == []
    assert first.error == second.error == "NVML: NVML Shared Library Not Found"
    assert broken.inits == 1


def test_the_kernels_answer_carries_the_devices_and_no_poll_is_activity(tmp_path):
    """Issue 40: between cells the page reads the device's figures from ``gpu-hygiene/kernels``
    (``devices``: NVML's reading, here the fake's, which lists the kernels' pids) every second
    or so, and Prometheus scrapes ``gpu-hygiene/metrics``: neither request is a user's activity,
    so the server's ``last_activity`` (``/api/status``, what JupyterHub's single-user server
    reports to the hub) does not move, while an ordinary API request moves it."""
    env = jupyter_env(tmp_path)
    config = tmp_path / "nvml.json"
    fake_nvml(config, {})
    fake_dir = ROOT / "test" / "agent" / "fake_nvml"
    env["PYTHONPATH"] = os.pathsep.join([str(fake_dir), env["PYTHONPATH"]])
    env["FAKE_NVML_CONFIG"] = str(config)
    server = start_with_kernels(tmp_path, "devices", env=env)
    pids = []
    try:
        status, answer = server.get("gpu-hygiene/kernels")
        assert status == 200
        pids = [k["pid"] for k in answer["kernels"]]
        fake_nvml(config, {pid: 300 * MiB for pid in pids})
        status, answer = server.get("gpu-hygiene/kernels")
        assert answer["devices"]["error"] is None
        assert abs(answer["devices"]["t"] - time.time()) < 5
        (device,) = answer["devices"]["devices"]
        assert device["uuid"] == "GPU-fake-h100-0" and device["index"] == "0"
        assert device["total"] == 80 * 2**30 and device["mig"] is False
        assert device["used"] == 2 * 300 * MiB + 512 * MiB
        assert device["processes"] == [{"pid": p, "used": 300 * MiB} for p in sorted(pids)]
        assert "utilization" in device

        def last_activity():
            status, model = server.get("api/status")
            assert status == 200
            return model["last_activity"]

        before = last_activity()
        time.sleep(0.05)
        for _ in range(3):
            assert server.get("gpu-hygiene/kernels")[0] == 200
            assert scrape(server)[0] == 200
        assert last_activity() == before
        assert server.get("api/kernels")[0] == 200  # an ordinary API request is activity
        assert last_activity() > before
    finally:
        stop_and_reap([server], pids)


def test_without_nvml_the_answer_says_why(servers):
    status, answer = servers[0].get("gpu-hygiene/kernels")
    assert status == 200
    assert answer["devices"]["devices"] == []
    assert "NVML" in answer["devices"]["error"] or "nvidia-ml-py" in answer["devices"]["error"]
