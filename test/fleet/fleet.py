"""What the fleet tests share: free ports, server processes stopped with every process they
started, HTTP on 127.0.0.1, a notebook page's kernel connection (``Page``: one websocket, as
JupyterLab holds it, that installs the agent exactly as the browser does and opens its comm) and
an IOPub tap that counts what a kernel publishes without being a connection of the server.
"""

import asyncio
import contextlib
import datetime
import json
import os
import queue
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import psutil
from kernel_driver import HELLO_EXPRESSION, PROTOCOL, TARGET, install_code

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
# make's stamped installs (Makefile: test-fleet)
CHP = ROOT / ".make" / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"
PROMETHEUS = Path(os.environ.get("FLEET_PROMETHEUS", "/usr/bin/prometheus"))

# no proxy from the environment between the tests and their servers
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port():
    """A port free now on 127.0.0.1 (for programs that cannot bind port 0 and say which)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(url, method="GET", body=None, token=None, timeout=30):
    """``(status, JSON or text or None)``; 4xx/5xx are returned, connection errors raised."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("Authorization", f"token {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with OPENER.open(req, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    text = raw.decode(errors="replace")
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, text


async def arequest(*args, **kwargs):
    """``request`` off the event loop (the pages' websockets keep reading meanwhile)."""
    return await asyncio.to_thread(request, *args, **kwargs)


def iso(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Proc:
    """A server process with its log in a file; ``stop`` ends it and every process it started
    that is still there (a hub's proxy, services, single-user servers and their kernels), so
    that nothing outlives the test. ``leftovers`` lists those that had to be killed."""

    def __init__(self, name, argv, tmp, env=None, cwd=None):
        self.name = name
        self.log = Path(tmp) / f"{name}.log"
        self.leftovers = []
        self._seen = {}
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [str(a) for a in argv],
                env=env,
                cwd=cwd or tmp,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def alive(self):
        return self.proc.poll() is None

    def text(self):
        return self.log.read_text(errors="replace")

    def remember_descendants(self):
        """Notes the processes it runs now (single-user servers and kernels start their own
        sessions, so a process group would not hold them)."""
        try:
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    self._seen[child.pid] = (child.create_time(), " ".join(child.cmdline())[:160])
        except psutil.Error:
            pass

    def stop(self, wait=30):
        self.remember_descendants()
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        # what it started must end with it (a hub stops its servers, proxy and services)
        deadline = time.monotonic() + 15
        for pid, (created, cmdline) in self._seen.items():
            try:
                child = psutil.Process(pid)
                if child.create_time() != created:
                    continue  # the pid was reused
                child.wait(max(0.1, deadline - time.monotonic()))
            except psutil.NoSuchProcess:
                continue
            except psutil.TimeoutExpired:
                self.leftovers.append(f"{pid} {cmdline}")
                with contextlib.suppress(psutil.Error):
                    child.kill()


# ---- a notebook page's kernel connection


class Page:
    """A page's kernel connection: one websocket on ``{base}api/kernels/<id>/channels`` (through
    a hub's proxy when ``base`` is a ``/user/<name>/`` URL), JSON messages as JupyterLab's
    default protocol sends them. ``inject`` sends the agent's install request exactly as the
    browser does (``kernel_driver.install_code``, silent, with the hello user expression);
    ``open_comm`` opens the agent's comm with ``configure`` data like the page. Every message
    received is kept with its arrival time (``log``)."""

    def __init__(self, base, kernel_id, token, name="page"):
        self.name = name
        self.kernel_id = kernel_id
        self.url = (
            base.replace("http://", "ws://", 1)
            + f"api/kernels/{kernel_id}/channels?session_id={uuid.uuid4().hex}"
        )
        self.token = token
        self.session = uuid.uuid4().hex
        self.log = []  # (time.time(), message)
        self.ws = None
        self.closed_at = None
        self.comm_id = None
        self._arrived = asyncio.Event()
        self._reader = None

    async def open(self, timeout=60):
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        request_ = HTTPRequest(
            self.url,
            headers={"Authorization": f"token {self.token}"},
            connect_timeout=timeout,
            request_timeout=timeout,
        )
        self.ws = await websocket_connect(request_, max_message_size=64 * 2**20)
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self):
        while True:
            text = await self.ws.read_message()
            if text is None:
                self.closed_at = time.time()
                self._arrived.set()
                return
            if isinstance(text, bytes):
                continue  # the binary protocol is not asked for
            self.log.append((time.time(), json.loads(text)))
            self._arrived.set()

    def send(self, channel, msg_type, content):
        msg_id = uuid.uuid4().hex
        header = {
            "msg_id": msg_id,
            "msg_type": msg_type,
            "username": "fleet",
            "session": self.session,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "version": "5.3",
        }
        message = {
            "header": header,
            "parent_header": {},
            "metadata": {},
            "content": content,
            "channel": channel,
            "buffers": [],
        }
        self.ws.write_message(json.dumps(message))
        return msg_id

    async def wait(self, predicate, timeout=60, what="a message"):
        """The first logged message (oldest first) that ``predicate(message)`` accepts."""
        deadline = time.monotonic() + timeout
        while True:
            for _, message in self.log:
                if predicate(message):
                    return message
            if self.closed_at is not None:
                raise AssertionError(f"{self.name}: websocket closed while waiting for {what}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{self.name}: no {what} within {timeout} s")
            self._arrived.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), min(left, 1.0))

    def execute(self, code, silent=False, store_history=True, user_expressions=None):
        """Sends an execute request; returns its msg_id (``finished`` waits for it)."""
        return self.send(
            "shell",
            "execute_request",
            {
                "code": code,
                "silent": silent,
                "store_history": store_history,
                "user_expressions": user_expressions or {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
        )

    async def finished(self, msg_id, timeout=120):
        """The execute_reply content of ``msg_id``, once its 'idle' status is in too."""
        reply = await self.wait(
            lambda m: (
                m.get("msg_type") == "execute_reply" and m["parent_header"].get("msg_id") == msg_id
            ),
            timeout,
            "execute_reply",
        )
        await self.wait(
            lambda m: (
                m.get("msg_type") == "status"
                and m["parent_header"].get("msg_id") == msg_id
                and m["content"]["execution_state"] == "idle"
            ),
            timeout,
            "idle status",
        )
        return reply["content"]

    async def run(self, code, timeout=120):
        """A user cell, to its end."""
        content = await self.finished(self.execute(code), timeout)
        assert content["status"] == "ok", content
        return content

    async def inject(self):
        """The agent's install request as the browser sends it."""
        msg_id = self.execute(
            install_code(), silent=True, store_history=False, user_expressions=HELLO_EXPRESSION
        )
        content = await self.finished(msg_id)
        assert content["status"] == "ok", content
        return content

    def comm_messages(self, since=0.0):
        """``[(time, type)]`` of the agent comm's messages that arrived after ``since``."""
        return [
            (t, m["content"]["data"].get("type"))
            for t, m in self.log
            if t > since
            and m.get("msg_type") == "comm_msg"
            and m["content"].get("comm_id") == self.comm_id
        ]

    async def open_comm(self, interval_ms=1000):
        """Opens the agent's comm like the page; waits for its hello and first inventory."""
        self.comm_id = uuid.uuid4().hex
        self.send(
            "shell",
            "comm_open",
            {
                "comm_id": self.comm_id,
                "target_name": TARGET,
                "data": {
                    "protocol": PROTOCOL,
                    "type": "configure",
                    "sampleIntervalMs": interval_ms,
                },
            },
        )
        for kind in ("hello", "inventory"):
            await self.wait(
                lambda m, kind=kind: (
                    m.get("msg_type") == "comm_msg"
                    and m["content"].get("comm_id") == self.comm_id
                    and m["content"]["data"].get("type") == kind
                ),
                60,
                f"the agent's {kind}",
            )

    async def cell_with_inventory(self, code):
        """Runs a user cell and waits for the agent's inventory after it (the last message a
        cell brings); returns the time it arrived."""

        def inventories():
            return sum(1 for _, kind in self.comm_messages() if kind == "inventory")

        before = inventories()
        await self.run(code)
        await self.wait(lambda _: inventories() > before, 60, "the inventory after the cell")
        return max(t for t, k in self.comm_messages() if k == "inventory")

    async def close(self):
        """Closes the websocket, as closing the tab does (no comm_close is sent: the page
        just goes)."""
        if self.ws is not None and self.closed_at is None:
            self.ws.close()
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(self._reader, 10)
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()


# ---- what a kernel publishes, without being one of its server's connections


class IopubTap:
    """Subscribes to a kernel's IOPub through its connection file (ZeroMQ, beside the server:
    jupyter_server counts websockets as connections, not this) and keeps ``(time, msg_type,
    comm data type)`` of every message, from a thread."""

    def __init__(self, connection_file):
        from jupyter_client.blocking import BlockingKernelClient

        self.client = BlockingKernelClient(connection_file=str(connection_file))
        self.client.load_connection_file()
        self.client.start_channels(shell=False, iopub=True, stdin=False, hb=False, control=False)
        self.messages = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self):
        while not self._stop.is_set():
            try:
                msg = self.client.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                continue
            except Exception:  # the kernel went away, the socket closed
                return
            kind = msg["msg_type"]
            detail = None
            if kind == "comm_msg":
                detail = (msg["content"].get("data") or {}).get("type")
            elif kind == "status":  # and the type of the request it answers
                parent = (msg.get("parent_header") or {}).get("msg_type")
                detail = f"{msg['content'].get('execution_state')}<-{parent}"
            self.messages.append((time.time(), kind, detail))

    def since(self, t):
        return [m for m in self.messages if m[0] > t]

    def stop(self):
        self._stop.set()
        self._thread.join(5)
        with contextlib.suppress(Exception):
            self.client.stop_channels()


def summary(messages, t0):
    """A short text of tapped messages: their count and the first ones, times relative to t0."""
    if not messages:
        return "0 messages"
    shown = ", ".join(
        f"+{t - t0:.1f}s {kind}{'/' + detail if detail else ''}" for t, kind, detail in messages[:8]
    )
    return f"{len(messages)} messages: {shown}{' ...' if len(messages) > 8 else ''}"
