"""The server extension (``jupyterlab_gpu_hygiene/server.py``) in real Jupyter servers, with real
kernels: ``GET {base_url}gpu-hygiene/kernels`` against ``/api/kernels`` and ``/api/sessions``.

Each server is a ``python -m jupyter_server`` subprocess with a token, this checkout first on
``PYTHONPATH`` (so it imports this package, not an installed copy) and a private
``JUPYTER_CONFIG_DIR`` holding nothing but the repository's
``jupyter-config/server-config/jupyterlab_gpu_hygiene.json`` under ``jupyter_server_config.d``:
the file the wheel installs is what enables the extension here. The environment's own configs
(JupyterLab, Notebook 7...) still load, as they do for users.

- ``local``: two kernels, one of them started by a session (``/api/sessions``), pids from the
  local provisioner; a third kernel, started by this test process with jupyter_client (another
  program on the same machine), must not be listed.
- ``gateway``: a Jupyter Kernel Gateway and a server in front of it (``--GatewayClient.url``,
  with a JupyterHub-style ``base_url``): no pid, ``gateway: true``, and a kernel another client
  started on the same gateway is not listed.

On a single-user server every kernel is the user's; "another user's kernel" is simulated by
those two kernels that this server did not start.
"""

import asyncio
import datetime
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

psutil = pytest.importorskip("psutil")  # an ipykernel dependency

pytestmark = pytest.mark.timeout(90)

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "jupyter-config" / "server-config" / "jupyterlab_gpu_hygiene.json"
ROUTE = "gpu-hygiene/kernels"
TOKEN = "gpu-hygiene-" + uuid.uuid4().hex
FIELDS = {"id", "name", "pid", "executionState", "lastActivity", "connections", "sessions"}


def free_port():
    """A port free now. Another process (a kernel's ZeroMQ socket, say) may bind it before the
    program it is meant for does: the Jupyter servers here bind port 0 instead (see ``Server``),
    and the Kernel Gateway moves to another port and says so (see ``gateway_port``)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def jupyter_env(tmp):
    """A Jupyter environment of its own under ``tmp``: config (with the shipped server config
    only), runtime (connection files), and this checkout first on the import path."""
    config_d = tmp / "config" / "jupyter_server_config.d"
    config_d.mkdir(parents=True)
    shutil.copy(CONFIG, config_d / CONFIG.name)
    (tmp / "runtime").mkdir()
    env = dict(os.environ)
    env.update(
        JUPYTER_CONFIG_DIR=str(tmp / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
    )
    env.pop("JUPYTER_NO_CONFIG", None)
    return env


# no proxy from the environment between the tests and their local servers
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def request(url, method="GET", body=None, token=TOKEN):
    """``(status, decoded JSON or None)`` of one HTTP request; 4xx/5xx are returned, not raised."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("Authorization", f"token {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with OPENER.open(req, timeout=30) as response:
            status, text = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read()
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, None


class Process:
    """A server subprocess, its log in a file, stopped with SIGTERM (a Jupyter server then shuts
    its kernels down) and killed if it does not stop."""

    def __init__(self, name, argv, env, tmp, ready_url, token=TOKEN):
        """``ready_url(process)``: the URL that answers 200 once the program serves, or ``None``
        while that is not known yet (the program has not written the port it bound)."""
        self.name = name
        self.log = tmp / f"{name}.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                argv, env=env, cwd=tmp, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"{name} exited ({self.proc.returncode}):\n{self.log.read_text()}")
            url = ready_url(self)
            try:
                if url and request(url, token=token)[0] == 200:
                    return
            except (OSError, http.client.HTTPException):
                # not listening yet; or another program on that port (HTTPException)
                pass
            time.sleep(0.2)
        self.stop()
        pytest.fail(f"{name} did not answer {ready_url(self)}:\n{self.log.read_text()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class Server(Process):
    """``python -m jupyter_server`` with the token, in ``tmp``, on a port the OS picks when the
    server binds it (``--ServerApp.port=0``; the server writes it to ``jpserver-<pid>.json`` in its
    runtime folder): no other process can take that port between choosing and binding it."""

    def __init__(self, name, tmp, env, *args, base_url="/"):
        self.port = None
        self.base_url = base_url
        self.info = Path(env["JUPYTER_RUNTIME_DIR"])
        (tmp / "root").mkdir(exist_ok=True)
        argv = [
            sys.executable,
            "-m",
            "jupyter_server",
            "--ServerApp.ip=127.0.0.1",
            "--ServerApp.port=0",
            f"--ServerApp.base_url={base_url}",
            f"--ServerApp.root_dir={tmp / 'root'}",
            f"--IdentityProvider.token={TOKEN}",
            "--ServerApp.open_browser=False",
            "--ServerApp.allow_root=True",
            *args,
        ]
        super().__init__(name, argv, env, tmp, lambda _: self.base and self.base + "api/status")

    @property
    def base(self):
        """``http://127.0.0.1:<port><base_url>``, or ``None`` before the server wrote its port."""
        if self.port is None:
            try:
                info = self.info / f"jpserver-{self.proc.pid}.json"
                self.port = json.loads(info.read_text())["port"]
            except (OSError, ValueError, KeyError):  # not written yet, or half written
                return None
        return f"http://127.0.0.1:{self.port}{self.base_url}"

    def get(self, path, **kwargs):
        return request(self.base + path, **kwargs)

    def post(self, path, body, **kwargs):
        return request(self.base + path, method="POST", body=body, **kwargs)


def stop_and_reap(processes, pids):
    """Stops the servers, then makes sure the kernel processes they ran are gone."""
    for process in processes:
        process.stop()
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            proc.wait(10)
        except psutil.NoSuchProcess:
            continue
        except psutil.TimeoutExpired:
            proc.kill()


def answer_ok(server):
    """The endpoint's answer (asserting a 200 and the field set of every row)."""
    status, answer = server.get(ROUTE)
    assert status == 200, answer
    # devices: the server's NVML reading, where the kernels are local (not behind a gateway)
    fields = {"kernels", "gateway", "sessionsHidden", "idleHolding"}
    assert set(answer) == (fields if answer["gateway"] else {*fields, "devices"})
    # the metrics' threshold (GpuHygieneMetrics defaults), for the panel's list
    assert answer["idleHolding"] == {"minutes": 30.0, "mib": 256.0}
    for row in answer["kernels"]:
        assert set(row) == FIELDS
    return answer


def iso(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


# ---- a local server


def start_with_kernels(tmp, name, *args, env=None):
    """A server in ``tmp`` (its environment ``env``, default ``jupyter_env(tmp)``) with two
    kernels: one started through ``/api/kernels`` (``server.plain``), one by a session on
    ``runs/train.ipynb`` (``server.session``)."""
    server = Server(name, tmp, env or jupyter_env(tmp), *args)
    try:
        status, plain = server.post("api/kernels", {"name": "python3"})
        assert status == 201, plain
        status, session = server.post(
            "api/sessions",
            {
                "path": "runs/train.ipynb",
                "name": "train.ipynb",
                "type": "notebook",
                "kernel": {"name": "python3"},
            },
        )
        assert status == 201, session
    except BaseException:
        server.stop()  # it shuts its kernels down
        raise
    server.plain, server.session = plain, session
    return server


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    # the automatic restart after a kernel dies: polled every 0.5 s instead of 3 s
    server = start_with_kernels(
        tmp_path_factory.mktemp("local"), "local", "--KernelRestarter.time_to_dead=0.5"
    )
    pids = []
    try:
        server.answer = answer_ok(server)
        pids.extend(k["pid"] for k in server.answer["kernels"] if k["pid"])
        yield server
    finally:
        stop_and_reap([server], pids)


def test_lists_the_kernels_of_api_kernels_with_their_pids(local):
    status, kernels = local.get("api/kernels")
    assert status == 200
    answer = local.answer
    assert answer["gateway"] is False
    assert {k["id"] for k in answer["kernels"]} == {k["id"] for k in kernels}
    started = {local.plain["id"], local.session["kernel"]["id"]}
    assert {k["id"] for k in answer["kernels"]} == started
    models = {k["id"]: k for k in kernels}
    for row in answer["kernels"]:
        model = models[row["id"]]
        assert row["name"] == model["name"] == "python3"
        assert row["executionState"] in {"starting", "idle", "busy"}
        assert isinstance(row["connections"], int)
        assert iso(row["lastActivity"]).tzinfo is not None
        # a live process of this machine: the kernel, launched for this kernel id
        proc = psutil.Process(row["pid"])
        assert proc.is_running()
        cmdline = " ".join(proc.cmdline())
        assert "ipykernel" in cmdline
        assert f"kernel-{row['id']}.json" in cmdline  # its connection file
    assert len({k["pid"] for k in answer["kernels"]}) == 2


def test_the_session_path_maps_to_its_kernel(local):
    rows = {k["id"]: k for k in local.answer["kernels"]}
    session = local.session
    assert rows[session["kernel"]["id"]]["sessions"] == [
        {"id": session["id"], "path": "runs/train.ipynb", "name": "train.ipynb", "type": "notebook"}
    ]
    assert rows[local.plain["id"]]["sessions"] == []
    assert local.answer["sessionsHidden"] is False  # the token's user may read sessions


async def _kernel_pid_over_websocket(server, kernel_id, while_connected):
    """Asks the kernel for ``os.getpid()`` (a silent execute's user expression) over the
    server's kernel websocket, the way the browser talks to kernels, and calls
    ``while_connected()`` before closing it. Returns ``(pid, while_connected's result)``."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    url = server.base.replace("http://", "ws://") + f"api/kernels/{kernel_id}/channels"
    ws = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {TOKEN}"}))
    try:
        msg_id = uuid.uuid4().hex
        header = {
            "msg_id": msg_id,
            "msg_type": "execute_request",
            "username": "test",
            "session": uuid.uuid4().hex,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "version": "5.3",
        }
        content = {
            "code": "",
            "silent": True,
            "store_history": False,
            "user_expressions": {"pid": "__import__('os').getpid()"},
            "allow_stdin": False,
            "stop_on_error": False,
        }
        message = {"header": header, "parent_header": {}, "metadata": {}, "content": content}
        await ws.write_message(json.dumps({**message, "channel": "shell", "buffers": []}))
        while True:
            text = await asyncio.wait_for(ws.read_message(), 30)
            assert text is not None, "the kernel websocket closed"
            reply = json.loads(text)
            if (
                reply.get("channel") == "shell"
                and reply["parent_header"].get("msg_id") == msg_id
                and reply["msg_type"] == "execute_reply"
            ):
                break
        expression = reply["content"]["user_expressions"]["pid"]
        assert expression["status"] == "ok", expression
        return int(expression["data"]["text/plain"]), while_connected()
    finally:
        ws.close()


def test_the_pid_is_the_kernels_own_and_connections_count_websockets(local):
    kernel_id = local.plain["id"]
    pid, during = asyncio.run(
        _kernel_pid_over_websocket(local, kernel_id, lambda: answer_ok(local))
    )
    rows = {k["id"]: k for k in during["kernels"]}
    assert rows[kernel_id]["pid"] == pid  # what the kernel itself says os.getpid() is
    assert rows[kernel_id]["connections"] == 1
    assert rows[local.session["kernel"]["id"]]["connections"] == 0
    assert rows[kernel_id]["executionState"] in {"idle", "busy"}


def test_without_a_valid_token_the_answer_is_403(local):
    for token in (None, "not-the-token"):
        status, body = local.get(ROUTE, token=token)
        assert status == 403  # APIHandler: no login redirect, 403 (jupyter_server's behaviour)
        assert "kernels" not in (body or {})


def test_only_get_is_answered(local):
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        body = None if method == "DELETE" else {"pid": 1}
        status, _ = request(local.base + ROUTE, method=method, body=body)
        assert status == 405, method
    # still running, still listed
    assert {k["id"] for k in answer_ok(local)["kernels"]} == {
        k["id"] for k in local.answer["kernels"]
    }


def test_arguments_are_not_read(local):
    def essentials(answer):
        return sorted((k["id"], k["pid"], json.dumps(k["sessions"])) for k in answer["kernels"])

    some_id = local.plain["id"]
    queries = ["?pid=1", f"?pid={os.getpid()}&kernel_id={some_id}", "?id=x&gateway=true"]
    for query in queries:
        status, answer = local.get(ROUTE + query)
        assert status == 200
        assert answer["gateway"] is False
        assert essentials(answer) == essentials(local.answer), query
    # no path argument either
    assert local.get(f"{ROUTE}/{some_id}")[0] == 404
    assert local.get(f"{ROUTE}/1")[0] == 404


def test_a_kernel_this_server_did_not_start_is_not_listed(local):
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3")
    try:
        other_pid = manager.provisioner.process.pid
        answer = answer_ok(local)
        assert other_pid not in {k["pid"] for k in answer["kernels"]}
        assert len(answer["kernels"]) == 2
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_a_dead_kernel_process_is_never_reported_and_its_restart_is(local):
    """The pid of an exited kernel process is never sent (it may be reused by then); after the
    server's automatic restart, the new process is."""
    status, kernel = local.post("api/kernels", {"name": "python3"})
    assert status == 201, kernel
    try:
        (old,) = [k["pid"] for k in answer_ok(local)["kernels"] if k["id"] == kernel["id"]]
        process = psutil.Process(old)
        process.kill()  # a process this test's server started
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # dead: a zombie until the server reaps it, or gone
            try:
                if process.status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.01)
        seen = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            rows = {k["id"]: k for k in answer_ok(local)["kernels"]}
            seen.append(rows[kernel["id"]]["pid"])
            if seen[-1] not in (None, old):
                break
            time.sleep(0.1)
        assert old not in seen, seen
        new = seen[-1]
        assert new not in (None, old), seen
        assert f"kernel-{kernel['id']}.json" in " ".join(psutil.Process(new).cmdline())
    finally:
        assert request(local.base + f"api/kernels/{kernel['id']}", method="DELETE")[0] == 204


AUTHORIZER = '''
from jupyter_server.auth.authorizer import Authorizer


class NoKernelReading(Authorizer):
    """Allows everything but reading kernels."""

    def is_authorized(self, handler, user, action, resource):
        return not (resource == "kernels" and action == "read")
'''


def test_the_authorizer_is_asked_about_reading_kernels(tmp_path):
    """A server whose authorizer denies ``read`` on ``kernels`` (and nothing else) answers 403,
    as it does for ``GET /api/kernels``."""
    (tmp_path / "no_kernel_reading.py").write_text(AUTHORIZER)
    env = jupyter_env(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    server = Server(
        "authz", tmp_path, env, "--ServerApp.authorizer_class=no_kernel_reading.NoKernelReading"
    )
    try:
        assert server.get("api/kernels")[0] == 403
        assert server.get(ROUTE)[0] == 403
        assert server.get("api/contents")[0] == 200  # the token itself is valid
    finally:
        stop_and_reap([server], [])


KERNELS_ONLY = '''
from jupyter_server.auth.authorizer import Authorizer


class ReadKernelsOnly(Authorizer):
    """Allows the kernels (reading them, and starting one for the test) and the server's
    status (the test waits for it); never the sessions."""

    def is_authorized(self, handler, user, action, resource):
        return resource == "kernels" or (resource == "api" and action == "read")
'''


def test_notebook_paths_need_the_permission_of_api_sessions(tmp_path):
    """A user allowed to read kernels but not sessions gets the kernels and their pids, never
    the notebook paths that ``/api/sessions`` refuses them."""
    (tmp_path / "read_kernels_only.py").write_text(KERNELS_ONLY)
    env = jupyter_env(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    server = Server(
        "kernels-only",
        tmp_path,
        env,
        "--ServerApp.authorizer_class=read_kernels_only.ReadKernelsOnly",
    )
    pids = []
    try:
        status, kernel = server.post("api/kernels", {"name": "python3"})
        assert status == 201, kernel
        assert server.get("api/sessions")[0] == 403
        answer = answer_ok(server)
        (row,) = answer["kernels"]
        assert row["id"] == kernel["id"] and row["sessions"] == []
        assert answer["sessionsHidden"] is True
        pids.append(row["pid"])
    finally:
        stop_and_reap([server], [p for p in pids if p])


def test_the_shipped_config_enables_the_extension(tmp_path):
    """``jupyter server extension list`` with the shipped config file: enabled, validated."""
    env = jupyter_env(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "jupyter", "server", "extension", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)  # its colours
    lines = [line.strip() for line in text.splitlines()]
    enabled = [line for line in lines if line.startswith("jupyterlab_gpu_hygiene ")]
    assert any("enabled" in line for line in enabled), lines
    assert any(line.endswith("OK") for line in enabled), lines
    assert json.loads(CONFIG.read_text()) == {
        "ServerApp": {"jpserver_extensions": {"jupyterlab_gpu_hygiene": True}}
    }


# ---- kernels behind a Kernel Gateway


def listening_at(kg):
    """The URL the Kernel Gateway says it listens on (it moves past a port in use), or ``None``
    before it says so."""
    found = re.search(r"is available at (http://127\.0\.0\.1:\d+)", kg.log.read_text())
    return found and found.group(1)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    pytest.importorskip("kernel_gateway")  # jupyter-kernel-gateway, in requirements-dev.txt
    tmp = tmp_path_factory.mktemp("gateway")
    env = jupyter_env(tmp)
    kg = Process(
        "kernelgateway",
        [
            sys.executable,
            "-m",
            "kernel_gateway",
            "--KernelGatewayApp.ip=127.0.0.1",
            f"--KernelGatewayApp.port={free_port()}",
            "--JupyterWebsocketPersonality.list_kernels=True",
        ],
        env,
        tmp,
        lambda kg: (url := listening_at(kg)) and url + "/api/kernelspecs",
        token=None,
    )
    gateway_url = listening_at(kg)
    processes = [kg]
    try:
        server = Server(
            "gateway-client",
            tmp,
            env,
            f"--GatewayClient.url={gateway_url}",
            base_url="/user/someone/",
        )
        processes.insert(0, server)
        status, mine = server.post("api/kernels", {"name": "python3"})
        assert status == 201, mine
        # another client of the same gateway (another user's server, say)
        status, theirs = request(
            gateway_url + "/api/kernels", method="POST", body={"name": "python3"}, token=None
        )
        assert status == 201, theirs
        server.mine, server.theirs, server.gateway_url = mine, theirs, gateway_url
        yield server
    finally:
        stop_and_reap(processes, [])


def test_behind_a_gateway_kernels_have_no_pid_and_others_kernels_are_not_listed(gateway, local):
    answer = answer_ok(gateway)
    assert answer["gateway"] is True
    assert [(k["id"], k["pid"]) for k in answer["kernels"]] == [(gateway.mine["id"], None)]
    (row,) = answer["kernels"]
    assert row["name"] == "python3"
    assert row["executionState"] in {"starting", "idle", "busy"}
    assert iso(row["lastActivity"]).tzinfo is not None
    # the gateway itself runs both; the server lists only its own (as /api/kernels does)
    status, on_gateway = request(gateway.gateway_url + "/api/kernels", token=None)
    assert status == 200
    assert {gateway.mine["id"], gateway.theirs["id"]} <= {k["id"] for k in on_gateway}
    assert {k["id"] for k in gateway.get("api/kernels")[1]} == {gateway.mine["id"]}
    # the route is under the server's base_url only, and authenticated there too
    assert request(f"http://127.0.0.1:{gateway.port}/{ROUTE}")[0] == 404
    assert gateway.get(ROUTE, token=None)[0] == 403
    # and the local server knows none of the gateway's kernels
    local_ids = {k["id"] for k in answer_ok(local)["kernels"]}
    assert not local_ids & {gateway.mine["id"], gateway.theirs["id"]}
