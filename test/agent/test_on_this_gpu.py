"""Issue 12 end to end, "who else is on my GPU": a real Jupyter server with this checkout's
server extension, two notebook sessions (``a.ipynb``, ``b.ipynb``) whose kernels this test
attaches to by their connection files (``Kernel.attach``; the agent injected and its comm opened
as the browser does), each holding a known amount of device memory, and a third plain process
holding 2 GiB. Kernel A's ``gpuProcesses``, the server's ``GET gpu-hygiene/kernels`` and the
browser's own code on them (compiled TypeScript through node, ``gpu_views.js``: the message
validation, the model, the join the gauge and the panel use, the gauge's tooltip, the "On this
GPU" table rendered by React) are checked per pid against ``nvidia-smi --query-compute-apps``;
then the agent's cost of one sample and of the process read with the real NVML
(``bench/nvml_cost.py --real``).

- ``[cuda]`` (marked gpu; the GPU check's group "processes"): torch allocations on cuda:0 in
  both kernels and the plain process.
- ``[cpu]``: the same plumbing with the fake NVML (``fake_nvml/pynvml.py`` first on the
  kernels' ``PYTHONPATH``, CUDA hidden), which lists the three pids with the known amounts;
  nothing is allocated, the fake's figures stand in for ``nvidia-smi`` and the cost is the
  fake's (``--delay``: emulated H200 latencies).

The browser's side has an agent in kernel A only (one notebook open): kernel B is known from
the server's answer alone, as a notebook open in another tab or by another client would be.
"""

import concurrent.futures
import contextlib
import decimal
import http.client
import importlib.util
import json
import os
import pwd
import select
import shutil
import signal
import subprocess
import sys
import time
import types
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import checks
import kernel_driver as kd
import pytest
from checks import MiB, mib
from conftest import DEVICES
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.timeout(300)

GiB = 1 << 30
ROOT = kd.ROOT
FAKE_DIR = Path(__file__).resolve().parent / "fake_nvml"
SERVER_CONFIG = ROOT / "jupyter-config" / "server-config" / "jupyterlab_gpu_hygiene.json"
ROUTE = "gpu-hygiene/kernels"
METRICS = "gpu-hygiene/metrics"
# issue 25: the server flags a kernel idle 0 min and holding >= 512 MiB (both kernels hold more)
IDLE_MIN_MIB = 512
KNOWN = {"a.ipynb": 1 * GiB, "b.ipynb": 3 * GiB, "plain": 2 * GiB}
ALLOCATE = (
    "import torch\n"
    "blob = torch.empty({n}, dtype=torch.uint8, device='cuda:0')\n"
    "torch.cuda.synchronize()\n"
)
# the third process: plain python, no agent, no Jupyter; holds its memory until killed
PLAIN = {
    "cuda": "import time, torch; x = torch.empty({n}, dtype=torch.uint8, device='cuda:0'); "
    "torch.cuda.synchronize(); print('ready', flush=True); time.sleep(600)",
    "cpu": "import time; print('ready', flush=True); time.sleep(600)",
}
# the agent's cost budgets (issue 3: the sampler takes at most 0.2 % of a core at 1 Hz, 2 ms a
# sample; the process read runs at most every 2 s, so the same share allows 4 ms)
SAMPLE_BUDGET_US = 2000
READ_BUDGET_US = 4000
COST_ROWS = (
    "sample (list unchanged)",
    "sample (list read again)",
    "gpuProcesses read, unchanged",
    "gpuProcesses read, sent",
    "gpuProcesses read, list read again",
)
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# --------------------------------------------------------------------------------------------
# the browser's views (compiled TypeScript through node)


@pytest.fixture(scope="session")
def views(request, tmp_path_factory):
    """``(render, description)``: ``kernel_driver.gpu_views`` of the compiled folder beside
    ``--cleanup-js`` (the GPU machine: no tsc, no node_modules), else compiled here with
    ``compile_browser`` into a folder outside the checkout, so that it runs without this
    checkout's node_modules as it does there. Skips without node, or without tsc and
    ``--cleanup-js``."""
    node = request.config.getoption("node") or shutil.which("node")
    if not node:
        pytest.skip("node is needed for the browser's views (--node)")
    given = request.config.getoption("cleanup_js")
    if given:
        folder = kd.views_folder(given)
    elif (ROOT / "node_modules" / ".bin" / "tsc").exists():
        folder = kd.views_folder(kd.compile_browser(tmp_path_factory.mktemp("views") / "js"))
    else:
        pytest.skip("the project's tsc or --cleanup-js is needed for the browser's views")
    try:
        render = kd.gpu_views(folder, node)
    except FileNotFoundError as exc:
        pytest.skip(f"{exc}: compile the folder with kernel_driver.compile_browser")
    version = subprocess.run(
        [node, "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return render, f"compiled TypeScript in {folder}, node {version}"


# --------------------------------------------------------------------------------------------
# the Jupyter server


class JupyterServer:
    """``python -m jupyter_server`` with a token, in ``tmp``, on a port the OS picks as the server
    binds it (``--ServerApp.port=0``, read back from its ``jpserver-<pid>.json``: a port chosen
    before would be free to a kernel's socket until the server binds it): a private config
    folder holding only the repository's ``jupyter-config/server-config`` file (the one the wheel
    installs: it enables the server extension), private runtime and data folders, this checkout
    first on ``PYTHONPATH``. Its kernels inherit its environment."""

    def __init__(self, tmp, env):
        config_d = tmp / "config" / "jupyter_server_config.d"
        config_d.mkdir(parents=True)
        shutil.copy(SERVER_CONFIG, config_d / SERVER_CONFIG.name)
        self.runtime = tmp / "runtime"
        self.root = tmp / "root"
        for folder in (self.runtime, self.root, tmp / "data"):
            folder.mkdir()
        self.env = dict(env)
        self.env.update(
            JUPYTER_CONFIG_DIR=str(tmp / "config"),
            JUPYTER_RUNTIME_DIR=str(self.runtime),
            JUPYTER_DATA_DIR=str(tmp / "data"),
        )
        self.env.pop("JUPYTER_NO_CONFIG", None)
        self.token = "gpu-hygiene-" + uuid.uuid4().hex
        self.base = None
        self.log = tmp / "server.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    *(sys.executable, "-m", "jupyter_server"),
                    *("--ServerApp.ip=127.0.0.1", "--ServerApp.port=0"),
                    *("--ServerApp.port_retries=0", f"--ServerApp.root_dir={self.root}"),
                    f"--IdentityProvider.token={self.token}",
                    *("--ServerApp.open_browser=False", "--ServerApp.allow_root=True"),
                    "--GpuHygieneMetrics.idle_minutes=0",
                    f"--GpuHygieneMetrics.idle_min_mib={IDLE_MIN_MIB}",
                ],
                env=self.env,
                cwd=tmp,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 90
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter server exited ({self.proc.returncode}): {self.tail()}")
            if self.base is None:
                # not written yet, or half written
                with contextlib.suppress(OSError, ValueError, KeyError):
                    info = self.runtime / f"jpserver-{self.proc.pid}.json"
                    self.base = f"http://127.0.0.1:{json.loads(info.read_text())['port']}/"
            # HTTPException: another program on the port; the server's exit then says why
            with contextlib.suppress(OSError, http.client.HTTPException):
                if self.base and self.request("api/status")[0] == 200:
                    break
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"jupyter server did not answer: {self.tail()}")
            time.sleep(0.2)

    def tail(self, n=3000):
        return self.log.read_text(errors="replace")[-n:]

    def request(self, path, method="GET", body=None, token=True):
        """``(status, decoded JSON or None)``; 4xx/5xx are returned, not raised."""
        status, text = self.fetch(path, method, body, token)
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, None

    def fetch(self, path, method="GET", body=None, token=True):
        """``(status, body as bytes)``; 4xx/5xx are returned, not raised."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if token:
            req.add_header("Authorization", f"token {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with OPENER.open(req, timeout=60) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def notebook_session(self, path):
        """A notebook session on a new python3 kernel (``POST /api/sessions``), as JupyterLab
        opens a notebook; the notebook file exists (empty)."""
        (self.root / path).write_text(
            json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
        )
        status, session = self.request(
            "api/sessions",
            "POST",
            {"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}},
        )
        if status != 201:
            raise RuntimeError(f"POST api/sessions {path}: {status} {session}")
        return session

    def connection_file(self, kernel_id, timeout=30):
        path = self.runtime / f"kernel-{kernel_id}.json"
        deadline = time.monotonic() + timeout
        while not path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {path.name} in the server's runtime folder")
            time.sleep(0.1)
        return path

    def stop(self):
        """SIGTERM (the server shuts its kernels down), SIGKILL after 20 s."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def reap(pid, timeout=10):
    """Wait for ``pid`` (a kernel the server ran) to be gone; SIGKILL it if it stays."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def wait_line(proc, text, timeout):
    """Wait until ``proc`` prints the line ``text`` (its stdout is a pipe)."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            raise RuntimeError(f"the plain process did not print {text!r} (rc {proc.poll()})")
        ready, _w, _x = select.select([proc.stdout], [], [], left)
        if ready and proc.stdout.readline().strip() == text:
            return


# --------------------------------------------------------------------------------------------
# figures


def format_bytes(n, digits=1):
    """``formatBytes`` of src/analysis/format.ts (``toFixed``: half up on the exact value)."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value, unit = n, 0
    while value >= 1024 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    if unit == 0:
        return f"{value} B"
    step = decimal.Decimal(1).scaleb(-digits)
    return f"{decimal.Decimal(value).quantize(step, decimal.ROUND_HALF_UP)} {units[unit]}"


def device0(message):
    """{pid: process} of device 0 of a ``gpuProcesses`` message."""
    for dev in message["devices"]:
        if dev["index"] == 0:
            return {p["pid"]: p for p in dev["processes"]}
    return {}


def lists_all(message, want):
    """Whether ``message`` lists every pid of ``want`` ({pid: least bytes}) with that much."""
    listed = device0(message)
    return all((listed.get(pid) or {}).get("used") is not None and listed[pid]["used"] >= least
               for pid, least in want.items())  # fmt: skip


def proc_comm(pid):
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/comm").read_text().strip()
    return None


def fake_config(path, pids):
    """The fake NVML's devices: one H200-like device listing ``pids`` ({pid: bytes})."""
    compute = [{"pid": pid, "used": used} for pid, used in pids.items()]
    config = {
        "devices": [
            {
                "name": "Fake H200",
                "uuid": "GPU-fake-h200-0",
                "total": 140 * GiB,
                "used": sum(pids.values()) + 512 * MiB,
                "compute": compute,
                "graphics": [],
                "migMode": 0,
            }
        ]
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(config))
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------
# the run: the server, its two kernels, the plain process, what each side says


def server_env(cuda, nvml_config):
    """The server's (and so its kernels') environment: this checkout first on ``PYTHONPATH``;
    on the CPU the fake NVML before it, reading ``nvml_config`` (CUDA stays visible: the fake
    maps its device through ``CUDA_VISIBLE_DEVICES``; no torch runs in the CPU variant)."""
    env = dict(os.environ)
    first = [str(ROOT)] if cuda else [str(FAKE_DIR), str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join([*first, *filter(None, [env.get("PYTHONPATH")])])
    if not cuda:
        env["FAKE_NVML_CONFIG"] = str(nvml_config)
        fake_config(nvml_config, {})
    return env


def allocate(cuda, kernels, plain):
    """The known amounts on cuda:0: a tensor in each kernel (both cells at once) and the plain
    process's (started before); on the CPU the cells only (the fake lists the amounts)."""
    if not cuda:
        for kernel in kernels.values():
            kernel.run("blob = None  # [cuda]: a tensor of the known amount on cuda:0")
    else:
        with concurrent.futures.ThreadPoolExecutor(len(kernels)) as pool:
            runs = {
                path: pool.submit(kernel.run, ALLOCATE.format(n=KNOWN[path]), 180)
                for path, kernel in kernels.items()
            }
            results = {path: run.result() for path, run in runs.items()}
        for path, result in results.items():
            if result.error is not None:
                error = result.error
                raise AssertionError(f"{path}: {error['ename']}: {error['evalue']}"[:300])
    wait_line(plain, "ready", 120)


def run_on_one_gpu(cuda, tmp, label, render):
    """Everything the rows compare, read while the three processes hold their memory; then
    every process of the run ended (the clients closed, the plain process killed, the server
    stopped, which shuts its kernels down)."""
    seen = types.SimpleNamespace()
    nvml_config = tmp / "nvml.json"
    env = server_env(cuda, nvml_config)
    with contextlib.ExitStack() as stack:
        server = JupyterServer(tmp, env)
        kernel_pids = []  # reaped once the server stopped
        stack.callback(lambda: [reap(pid) for pid in kernel_pids])
        stack.callback(server.stop)
        stack.callback(lambda: checks.log.info("jupyter server log:\n%s", server.tail(20000)))
        checks.log.info("\n===== %s: jupyter server %s", label, server.base)
        sessions = {path: server.notebook_session(path) for path in ("a.ipynb", "b.ipynb")}
        seen.ids = {path: session["kernel"]["id"] for path, session in sessions.items()}
        kernels = {}
        for path, kernel_id in seen.ids.items():
            kernels[path] = kd.Kernel.attach(server.connection_file(kernel_id))
            stack.callback(kernels[path].shutdown)  # the client only: the server ends the kernel
        code = PLAIN["cuda" if cuda else "cpu"].format(n=KNOWN["plain"])
        plain = subprocess.Popen(
            [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True
        )
        stack.callback(plain.wait)
        stack.callback(plain.kill)
        comms = {}
        for path, kernel in kernels.items():  # as the browser: the agent, then its comm
            kernel.inject({"sampleIntervalMs": 1000})
            comms[path] = kernel.open_comm(1000)
            kernel_pids.append(comms[path].messages("hello")[0]["pid"])
        seen.pid = {path: comm.messages("hello")[0]["pid"] for path, comm in comms.items()}
        seen.pid["plain"] = plain.pid
        a = comms["a.ipynb"]

        started = time.monotonic()
        allocate(cuda, kernels, plain)
        seen.cells_ended = time.time()  # (B's last cell ended before this)
        seen.plain_comm = proc_comm(plain.pid)
        if not cuda:
            fake_config(nvml_config, {seen.pid[k]: KNOWN[k] for k in KNOWN})
        seen.allocated_s = time.monotonic() - started

        # kernel A's list with all three, each with at least its known amount
        want = {seen.pid[k]: KNOWN[k] for k in KNOWN}
        started = time.monotonic()
        # A is idle: its agent says nothing of other processes on its own (issue 40); the page
        # asks when the user opens the panel (a sample request: a sample and the list)
        while not any(lists_all(m, want) for m in a.messages("gpuProcesses")):
            if time.monotonic() - started > 30:
                break
            a.send({"protocol": kd.PROTOCOL, "type": "sample"})
            kernels["a.ipynb"].pump(1.0)
        seen.waited_s = time.monotonic() - started
        seen.listed = [m for m in a.messages("gpuProcesses") if lists_all(m, want)]
        seen.message = (seen.listed or a.messages("gpuProcesses") or [None])[0]

        seen.status, seen.answer = server.request(ROUTE)
        seen.no_token = server.request(ROUTE, token=False)[0]
        seen.metrics_no_token = server.fetch(METRICS, token=False)[0]
        a.request_sample(timeout=10)  # a fresh sample
        for attempt in range(2):
            # the truth beside the browser's view of A's messages: nvidia-smi (the fake's
            # figures on the CPU) and NVML from this process
            seen.smi, seen.nvml = truth(cuda, seen.pid)
            seen.metrics_status, seen.metrics = server.fetch(METRICS)
            seen.now = time.time()
            seen.views = render(
                {
                    "kernelId": seen.ids["a.ipynb"],
                    "path": "a.ipynb",
                    "messages": a.messages(),
                    "server": seen.answer,
                    "now": seen.now * 1000,
                }
            )
            seen.rows = {row["pid"]: row for row in (seen.views["join"] or {}).get("rows", [])}
            moved = any(gap is None or abs(gap) > 1 for gap in gaps(seen).values())
            if attempt or not moved or not seen.listed:
                break
            # a figure moved between the agent's read and nvidia-smi's: the next list
            with contextlib.suppress(AssertionError):
                a.request_sample(timeout=10)
                a.wait_for("gpuProcesses", len(a.messages("gpuProcesses")) + 1, timeout=12)
        seen.lists = len(a.messages("gpuProcesses"))
        for path, comm in comms.items():
            checks.RUN.agent_errors[f"{label}:{path}"] = comm.messages("error")
        seen.bench = run_bench(cuda, tmp)
    return seen


def truth(cuda, pid):
    """({pid: nvidia-smi MiB}, {pid: NVML bytes from this process}); on the CPU the fake's
    figures and no NVML."""
    if not cuda:
        return {pid[k]: KNOWN[k] / MiB for k in KNOWN}, {}
    nv = checks.nvml()
    return checks.smi_compute_apps(nv.uuid(0)), {pid[k]: nv.process(0, pid[k]) for k in KNOWN}


def gaps(seen):
    """{process: the join's MiB on cuda:0 - nvidia-smi's} (None where either is missing)."""
    out = {}
    for k in KNOWN:
        row, figure = seen.rows.get(seen.pid[k]), seen.smi.get(seen.pid[k])
        got = (row or {}).get("bytes", {}).get("cuda:0")
        out[k] = None if got is None or figure is None else got / MiB - figure
    return out


# --------------------------------------------------------------------------------------------
# the check


@pytest.mark.parametrize("device", DEVICES)
def test_two_notebooks_and_a_plain_process_on_one_gpu(device, check, views, tmp_path, request):
    if importlib.util.find_spec("jupyter_server") is None:
        pytest.skip("jupyter_server is not installed (the GPU check installs it from --wheels)")
    render, described = views
    cuda = device == "cuda"
    started = time.monotonic()
    seen = run_on_one_gpu(cuda, tmp_path, request.node.name, render)
    server_row(check, seen)
    list_row(check, seen, cuda)
    join_rows(check, seen, cuda)
    view_rows(check, seen)
    metrics_rows(check, seen, cuda)
    cost_rows(check, seen.bench)
    check.note(
        "12: a real jupyter_server (the repository's jupyter-config file enabling the server "
        "extension), two notebook sessions over POST /api/sessions, their kernels attached by "
        "connection file; the join, the tooltip and the 'On this GPU' table are the browser's "
        f"own TypeScript ({described}); kernel B is known to the browser from the server's "
        "answer only (one notebook open)."
    )
    check.extras["report_section"] = section(device, seen)
    checks.log.info("(%s: %.1f s)", request.node.name, time.monotonic() - started)


def server_row(check, seen):
    ids, pid, answer = seen.ids, seen.pid, seen.answer or {}
    listed = {k["id"]: k for k in answer.get("kernels", [])}

    def sessions(path):
        return [(s["path"], s["type"]) for s in listed.get(ids[path], {}).get("sessions", [])]

    check.row(
        "12a server extension: GET gpu-hygiene/kernels",
        "200 with the token, 403 without; both kernels, gateway false; each pid = the pid its "
        "agent reports (hello.pid); sessions a.ipynb / b.ipynb (notebook); valid for the browser "
        "(parseServerKernels)",
        f"{seen.status}, without token {seen.no_token}; "
        + "; ".join(
            f"{p}: pid {listed.get(ids[p], {}).get('pid')} (hello {pid[p]}), sessions "
            f"{sessions(p)}, {listed.get(ids[p], {}).get('executionState')}"
            for p in ids
        )
        + f"; gateway {answer.get('gateway')}; browser parse {seen.views['server']}",
        seen.status == 200
        and seen.no_token == 403
        and answer.get("gateway") is False
        and set(listed) == set(ids.values())
        and all(listed[ids[p]]["pid"] == pid[p] for p in ids)
        and all(sessions(p) == [(p, "notebook")] for p in ids)
        and seen.views["server"]["ok"],
    )


def scraped(text):
    """{metric name without the prefix: [(labels, value)]} of a Prometheus scrape (bytes)."""
    out = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            name = sample.name.removeprefix("jupyter_gpu_hygiene_")
            out.setdefault(name, []).append((sample.labels, sample.value))
    return out


def metrics_rows(check, seen, cuda):
    """Issue 25: the Prometheus endpoint's per-kernel VRAM against nvidia-smi, per kernel."""
    source = "nvidia-smi" if cuda else "the fake NVML"
    try:
        families = scraped(seen.metrics)
    except ValueError as error:  # not the exposition format: every row fails, saying so
        families = {"unparsed": [({}, str(error)[:200])]}
    vram = {
        labels.get("kernel_id"): value
        for labels, value in families.get("kernel_vram_bytes", [])
        if labels.get("device") == "0"
    }
    flagged = {
        labels.get("kernel_id"): value
        for labels, value in families.get("kernel_idle_holding_vram", [])
    }
    nvml = families.get("nvml_available", [])
    check.row(
        "25a server extension: GET gpu-hygiene/metrics",
        "200 with the token, 403 without; parsed by prometheus_client.parser; nvml_available 1",
        f"{seen.metrics_status}, without token {seen.metrics_no_token}; nvml_available {nvml}",
        seen.metrics_status == 200
        and seen.metrics_no_token == 403
        and [value for _labels, value in nvml] == [1.0],
    )
    for path, kernel_id in seen.ids.items():
        figure = seen.smi.get(seen.pid[path])
        got = vram.get(kernel_id)
        gap = None if got is None or figure is None else got / MiB - figure
        check.row(
            f"25b {path}: kernel_vram_bytes vs {source}",
            f"= {source}'s figure for the kernel's pid within 1 MiB, at least the known "
            f"{mib(KNOWN[path], 0)}; kernel_idle_holding_vram 1 (idle >= 0 min, "
            f"holding >= {IDLE_MIN_MIB} MiB)",
            f"metrics {mib(got)}; {source} {figure} MiB"
            + ("" if gap is None else f"; difference {gap:+.2f} MiB")
            + f"; idle holding {flagged.get(kernel_id)}",
            gap is not None
            and abs(gap) <= 1
            and got >= KNOWN[path]
            and flagged.get(kernel_id) == 1.0,
        )


def list_row(check, seen, cuda):
    pid, message = seen.pid, seen.message
    procs = device0(message) if message else {}
    entry = {k: procs.get(pid[k]) or {} for k in KNOWN}
    check.row(
        "12b kernel A's gpuProcesses (cuda:0)",
        "namespace host; lists kernel A (self), kernel B and the plain process, each with at "
        "least its known amount (1, 3, 2 GiB"
        + ("; the CUDA context on top)" if cuda else ": the fake's figures)"),
        f"{seen.lists} message(s), the first with all three {seen.waited_s:.1f} s after the "
        f"allocations (which took {seen.allocated_s:.1f} s); namespace "
        f"{message['namespace'] if message else None}; "
        + ", ".join(
            f"{k} {pid[k]}: {mib(e.get('used'))} {e.get('kind')}{' self' if e.get('self') else ''}"
            for k, e in entry.items()
        ),
        bool(seen.listed)
        and message["namespace"] == "host"
        and entry["a.ipynb"]["self"] is True
        and not entry["b.ipynb"]["self"]
        and not entry["plain"]["self"],
    )


def join_rows(check, seen, cuda):
    pid, rows = seen.pid, seen.rows
    source = "nvidia-smi" if cuda else "the fake NVML"
    for k, gap in gaps(seen).items():
        got = (rows.get(pid[k]) or {}).get("bytes", {}).get("cuda:0")
        check.row(
            f"12c {k} (pid {pid[k]}): the join's bytes vs {source}",
            (
                "= nvidia-smi --query-compute-apps used_memory within 1 MiB (= NVML from this "
                "process)"
                if cuda
                else "= the fake NVML's figure (no nvidia-smi here) within 1 MiB"
            )
            + f"; at least the known {mib(KNOWN[k], 0)}",
            f"join {mib(got)}; {source} {seen.smi.get(pid[k])} MiB"
            + (f"; NVML here {mib(seen.nvml.get(pid[k]))}" if cuda else "")
            + ("" if gap is None else f"; difference {gap:+.2f} MiB"),
            gap is not None
            and abs(gap) <= 1
            and got >= KNOWN[k]
            and (not cuda or seen.nvml.get(pid[k]) == got),
        )
    b = rows.get(pid["b.ipynb"]) or {}
    kernel = b.get("kernel") or {}
    check.row(
        "12d join: kernel B's row",
        "your-kernel; notebook b.ipynb (the server's session); kernel id = B's; idle; in the "
        "server's list (Shut down kernel… offered); matched by the server's pid",
        f"{b.get('kind')}; notebook {kernel.get('notebook')}; id {str(kernel.get('id'))[:8]} "
        f"(B {seen.ids['b.ipynb'][:8]}); {kernel.get('state')}; inServer "
        f"{kernel.get('inServer')}; matched by {kernel.get('matchedBy')}; idle for "
        f"{kernel.get('idleSeconds') or 0:.1f} s by the {kernel.get('idleSource')}'s lastActivity "
        f"while its last cell ended {seen.now - seen.cells_ended:.1f} s or more before (the "
        "server counts every kernel message as activity, its agent's samples too)",
        b.get("kind") == "your-kernel"
        and kernel.get("notebook") == "b.ipynb"
        and kernel.get("id") == seen.ids["b.ipynb"]
        and kernel.get("state") == "idle"
        and kernel.get("inServer") is True
        and kernel.get("matchedBy") == "server",
    )
    mine = rows.get(pid["a.ipynb"]) or {}
    check.row(
        "12e join: kernel A's row",
        "this-kernel",
        mine.get("kind"),
        mine.get("kind") == "this-kernel",
    )
    other = rows.get(pid["plain"]) or {}
    user = pwd.getpwuid(os.getuid()).pw_name
    check.row(
        "12f join: the plain process",
        f"other-process; name = /proc/<pid>/comm ({seen.plain_comm}); cmdline its command line "
        f"({sys.executable} -c …); user {user}",
        f"{other.get('kind')}; name {other.get('name')}; user {other.get('user')}; cmdline "
        f"{str(other.get('cmdline'))[:80]!r}",
        other.get("kind") == "other-process"
        and other.get("name") is not None
        and other.get("name") == seen.plain_comm
        and str(other.get("cmdline")).startswith(f"{sys.executable} -c import time")
        and other.get("user") == user,
    )


def view_rows(check, seen):
    pid, rows, views = seen.pid, seen.rows, seen.views
    total = {k: (rows.get(pid[k]) or {}).get("total", -1) for k in KNOWN}
    tooltip = views["gauge"]["tooltip"]
    # what the join says of the rest of the device (any process NVML lists besides the three
    # counts there too; the rows above say whether there was one)
    kinds = {}
    for row in rows.values():
        kinds.setdefault(row["kind"], []).append(row["bytes"].get("cuda:0", 0))
    others = kinds.get("other-process", [])
    wanted = [
        f"This kernel: {format_bytes(total['a.ipynb'])} (NVML, includes the CUDA context)",
        f"Your other kernels: {format_bytes(sum(kinds.get('your-kernel', [])))}",
        f"Other processes: {format_bytes(sum(others))} ({len(others)})",
    ]
    check.row(
        "12g gauge tooltip (cuda:0)",
        "; ".join(f"'{line}'" for line in wanted) + " (the join's bytes: kernel A; kernel B; "
        "the plain process); no message dropped",
        " / ".join(tooltip) + (f"; dropped {views['dropped']}" if views["dropped"] else ""),
        all(line in tooltip for line in wanted) and not views["dropped"],
    )
    panel = views["panel"]
    cells = {r["pid"]: [*r["cells"], "", "", "", ""][:4] for r in panel["rows"]}
    b, a, plain = (cells.get(pid[k], [""] * 4) for k in ("b.ipynb", "a.ipynb", "plain"))
    other = rows.get(pid["plain"]) or {}
    user = pwd.getpwuid(os.getuid()).pw_name
    check.row(
        "12h panel 'On this GPU' (cuda:0)",
        "a row per process of the join, largest first, VRAM = the join's; b.ipynb, its state "
        "'idle for …' and Shut down kernel…; 'This kernel', 'this notebook'; the plain process "
        "by name · user and its command line; no note",
        " | ".join(" ; ".join(r["cells"]) for r in panel["rows"]) + f"; notes {panel['notes']}",
        [r["pid"] for r in panel["rows"]]
        == [r["pid"] for r in sorted(rows.values(), key=lambda r: -r["total"])]
        and all(pid[k] in cells for k in KNOWN)
        and all(cells[p][2] == format_bytes(rows[p]["bytes"].get("cuda:0", -1)) for p in cells)
        and b[0].startswith("b.ipynb")
        and b[3].startswith("idle for ")
        and b[3].endswith("Shut down kernel…")
        and a[0] == "This kernel"
        and a[3] == "this notebook"
        and plain[0].startswith(f"{other.get('name')} · {user} {sys.executable} -c")
        and not panel["notes"],
    )


# --------------------------------------------------------------------------------------------
# cost


def run_bench(cuda, tmp):
    """``bench/nvml_cost.py`` in its own process (``--real`` with CUDA, the fake with emulated
    latencies otherwise), while the three processes hold their memory; its JSON record."""
    out = tmp / "nvml_cost.json"
    command = [
        *(sys.executable, str(ROOT / "bench" / "nvml_cost.py"), "--processes", "2"),
        *("--reps", "2000" if cuda else "300", "--json", str(out)),
        "--real" if cuda else "--delay",
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    checks.log.info("$ %s\n%s%s", " ".join(command), done.stdout, done.stderr)
    if done.returncode != 0:
        return {"error": f"exit {done.returncode}: {done.stderr.strip()[-300:]}", "rows": []}
    return json.loads(out.read_text())


def bench_row(bench, label):
    for row in bench.get("rows", []):
        if row["label"] == label:
            return row
    return None


def calls_text(row):
    return ", ".join(f"{k.replace('nvmlDeviceGet', '')} {v:.3g}" for k, v in row["calls"].items())


def figures(row):
    return f"p50 {row['p50_us']:.1f} / p95 {row['p95_us']:.1f} us ({calls_text(row)})"


def cost_rows(check, bench):
    """Rows 12i (a sample) and 12j (the process read) from the bench's record."""
    if bench.get("error"):
        check.row("12i cost: bench/nvml_cost.py", "runs", bench["error"], False)
        return
    where = f"{bench.get('nvml')}, {bench.get('reps')} calls each"
    got = {label: bench_row(bench, label) for label in COST_ROWS}
    missing = [label for label, row in got.items() if row is None]
    if missing:
        check.row("12i cost: bench/nvml_cost.py", f"rows {COST_ROWS}", f"missing {missing}", False)
        return
    same, again = got["sample (list unchanged)"], got["sample (list read again)"]
    check.row(
        f"12i cost: one sample ({where})",
        f"p95 <= {SAMPLE_BUDGET_US / 1000:g} ms, also when the process list is read again "
        "(issue 3: the sampler <= 0.2 % of a core at 1 Hz)",
        f"list unchanged {figures(same)}; list read again (the device's memory moved) "
        f"{figures(again)}: the list costs {again['p50_us'] - same['p50_us']:.1f} us (p50) in "
        "the samples that read it",
        max(same["p95_us"], again["p95_us"]) <= SAMPLE_BUDGET_US,
    )
    reads = [got[label] for label in COST_ROWS[2:]]
    raw = [r for r in bench["rows"] if r["label"].startswith("NVML ")]
    check.row(
        f"12j cost: the process read, every 2 s at most ({where})",
        f"p95 <= {READ_BUDGET_US / 1000:g} ms, also when it sends (the same 0.2 % of a core at "
        "one read per 2 s)",
        "; ".join(f"{r['label'].removeprefix('gpuProcesses read, ')} {figures(r)}" for r in reads)
        + "".join(f"; {r['label']} p50 {r['p50_us']:.1f} / p95 {r['p95_us']:.1f} us" for r in raw),
        max(r["p95_us"] for r in reads) <= READ_BUDGET_US,
    )


# --------------------------------------------------------------------------------------------
# the report's section


def section(device, seen):
    """Markdown lines for the report: the tooltip and the panel's table as the browser shows
    them, the figures per pid against nvidia-smi, the cost."""
    name = {seen.pid[k]: k for k in KNOWN}
    panel, bench = seen.views["panel"], seen.bench
    source = "nvidia-smi" if device == "cuda" else "fake NVML"
    lines = [
        f"On this GPU (issue 12, `[{device}]`): the gauge's tooltip as the browser computes it "
        "(`gaugeState` of kernel A's model, the join with the server's answer):",
        "",
        "```",
        *seen.views["gauge"]["tooltip"],
        "```",
        "",
        "The VRAM panel's 'On this GPU' table (`GpuProcessesTable` rendered by React, as text):",
        "",
        "| " + " | ".join(panel["header"]) + " |",
        "| " + " | ".join("---" for _ in panel["header"]) + " |",
        *(
            "| " + " | ".join(c.replace("|", "\\|") for c in r["cells"]) + " |"
            for r in panel["rows"]
        ),
        "",
        f"Per pid: the join's bytes on cuda:0 against {source} (MiB):",
        "",
        f"| process | pid | known | join | {source} | difference |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    gap = gaps(seen)
    for p, row in sorted(seen.rows.items(), key=lambda item: -item[1]["total"]):
        got = row["bytes"].get("cuda:0")
        k = name.get(p)
        known = "" if k is None else f"{KNOWN[k] / MiB:.0f}"
        diff = "" if k is None or gap[k] is None else f"{gap[k]:+.2f}"
        lines.append(
            f"| {k or 'another process'} ({row['kind']}) | {p} | {known} | "
            f"{'' if got is None else f'{got / MiB:.2f}'} | {seen.smi.get(p)} | {diff} |"
        )
    if bench.get("rows"):
        lines += [
            "",
            f"Cost (`bench/nvml_cost.py`, {bench.get('nvml')}, {bench.get('reps')} calls each, "
            "one thread of a process beside the kernels, while the three held their memory):",
            "",
            "| figure | p50 us | p95 us | NVML calls per call |",
            "| --- | --- | --- | --- |",
            *(
                f"| {r['label']} | {r['p50_us']:.1f} | {r['p95_us']:.1f} | {calls_text(r)} |"
                for r in bench["rows"]
            ),
        ]
    return lines
