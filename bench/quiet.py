#!/usr/bin/env python3
"""What an idle kernel sends on IOPub (issue 40): messages and bytes per hour, counted on each
kernel's own IOPub socket by a listener that sends nothing, in a real JupyterLab server of this
checkout's ``.venv``. Every IOPub message moves jupyter_server's ``last_activity`` of its kernel
(``cull_idle_timeout``) and, through the server's, JupyterHub's idle culler's view of the user.

Kernels, side by side in one server, measured over the same window after a settle time:

- ``plain``: no agent (the floor: what any kernel sends idle);
- ``page``: a notebook open in Debian's chromium (``bench/quiet-page.mjs``), one cell run there:
  the extension's agent and comm as a user has them, the page left open;
- ``no page``: the agent injected and its comm opened as the page does (``kernel_driver``), one
  cell run, then the client gone (the tab closed);
- ``workers``: as ``no page``, and a thread of the kernel starts a child process every
  ``--period`` s that exits ``--life`` s later (a DataLoader worker coming and going): 2 changes
  a period, each should cost one message;
- ``previous agent``: as ``no page`` with the agent of ``--ref`` (default ``ec61343``, agent
  0.15.0, the last before the quiet agent), read from git: the baseline of the same run.

Per hour = the window's count x 3600 / window. Also printed: each kernel's jupyter_server
``last_activity`` age at the end (``/api/kernels``): how idle ``cull_idle_timeout`` sees it.
Writes bench/quiet.json (``--out``). Usage: ``.venv/bin/python bench/quiet.py [--window 600]``.
"""

import argparse
import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "agent"))

import kernel_driver as kd  # noqa: E402

VENV_BIN = Path(sys.executable).parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A JupyterLab server of this venv on 127.0.0.1 with a token, in a scratch folder."""

    def __init__(self, root):
        self.root = root
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}/"
        env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(root / "runtime"))
        self.log = open(root / "server.log", "w")  # noqa: SIM115 -- closed in stop()
        self.process = subprocess.Popen(
            [
                str(VENV_BIN / "jupyter"),
                "lab",
                "--no-browser",
                "--ip=127.0.0.1",
                f"--port={self.port}",
                f"--IdentityProvider.token={self.token}",
                "--LabApp.expose_app_in_browser=True",
                f"--ServerApp.root_dir={root}",
                *(["--allow-root"] if os.geteuid() == 0 else []),
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                self.get("api/status")
                return
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError((root / "server.log").read_text()[-2000:]) from None
                time.sleep(0.3)

    def request(self, path, method="GET", body=None):
        req = urllib.request.Request(
            self.base + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as response:
            text = response.read().decode()
            return json.loads(text) if text else None

    def get(self, path):
        return self.request(path)

    def connection_file(self, kernel_id):
        return self.root / "runtime" / f"kernel-{kernel_id}.json"

    def stop(self):
        for kernel in self.get("api/kernels"):
            with contextlib.suppress(OSError):
                self.request(f"api/kernels/{kernel['id']}", "DELETE")
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


class Listener:
    """Counts every IOPub message of one kernel (and its bytes, all frames) from when
    ``start_window`` is called; subscribes only, sends nothing to the kernel."""

    def __init__(self, connection_file):
        import zmq

        info = json.loads(Path(connection_file).read_text())
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.SUB)
        self.socket.setsockopt(zmq.SUBSCRIBE, b"")
        self.socket.connect(f"{info['transport']}://{info['ip']}:{info['iopub_port']}")
        self.counting = False
        self.messages = 0
        self.bytes = 0
        self.kinds = {}
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        import zmq

        poller = zmq.Poller()
        poller.register(self.socket, zmq.POLLIN)
        while not self.stop_event.is_set():
            if not poller.poll(200):
                continue
            frames = self.socket.recv_multipart()
            if not self.counting:
                continue
            self.messages += 1
            self.bytes += sum(len(f) for f in frames)
            try:
                delimiter = frames.index(b"<IDS|MSG>")
                kind = json.loads(frames[delimiter + 2])["msg_type"]
            except (ValueError, IndexError, KeyError, json.JSONDecodeError):
                kind = "?"
            if kind == "comm_msg":
                content = frames[delimiter + 5] if len(frames) > delimiter + 5 else b"{}"
                with contextlib.suppress(KeyError, AttributeError, json.JSONDecodeError):
                    kind += ":" + str(json.loads(content)["data"].get("type", "?"))
            self.kinds[kind] = self.kinds.get(kind, 0) + 1

    def start_window(self):
        self.messages = self.bytes = 0
        self.kinds = {}
        self.counting = True

    def close(self):
        self.counting = False
        self.stop_event.set()
        self.thread.join(timeout=5)
        self.socket.close(0)
        self.context.term()


WORKERS = """
import subprocess as _sp, sys as _sys, threading as _th, time as _t
def _workers(period={period}, life={life}):
    while True:
        _p = _sp.Popen([_sys.executable, "-c", "import time; time.sleep({life})"])
        _p.wait()
        _t.sleep(max(0.0, period - life))
_th.Thread(target=_workers, daemon=True, name="bench-workers").start()
"""


def previous_modules(ref):
    """The agent package of git ``ref``: [(name, text)] in its load order."""

    def show(path):
        return subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{ref}:{path}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    init = show("src/agent/gpu_hygiene_agent/__init__.py")
    import ast

    names = None
    for node in ast.parse(init).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "MODULES":
            names = ast.literal_eval(node.value)
    modules = [(n, show(f"src/agent/gpu_hygiene_agent/{n}.py")) for n in names]
    return [*modules, ("__init__", init)]


def with_agent(server, kernel_id, modules=None, code=None):
    """Inject the agent (``modules``: another version's) into a server's kernel as the page
    does, open its comm, run a cell (and ``code``), then disconnect (the tab closed)."""
    kernel = kd.Kernel(connection_file=server.connection_file(kernel_id))
    kernel.inject({"sampleIntervalMs": 1000}, source=kd.agent_source(modules) if modules else None)
    comm = kernel.open_comm(1000)
    kernel.run("x = list(range(1000))")
    if code:
        kernel.run(code)
    comm.wait_for("inventory", 2)
    kernel.kc.stop_channels()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=float, default=600.0, help="seconds counted (600)")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds before (20)")
    parser.add_argument("--period", type=float, default=30.0, help="a worker every N s (30)")
    parser.add_argument("--life", type=float, default=10.0, help="each lives N s (10)")
    parser.add_argument("--ref", default="ec61343", help="the previous agent's commit")
    parser.add_argument("--no-page", action="store_true", help="skip the browser kernel")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "quiet.json")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="gpu-hygiene-quiet-"))
    (root / "quiet.ipynb").write_text(
        json.dumps(
            {
                "cells": [
                    {
                        "cell_type": "code",
                        "source": "",
                        "metadata": {},
                        "outputs": [],
                        "execution_count": None,
                    }
                ],
                "metadata": {
                    "kernelspec": {
                        "name": "python3",
                        "display_name": "Python 3",
                        "language": "python",
                    }
                },
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    )
    server = Server(root)
    page = None
    listeners = {}
    try:
        kernels = {}
        for name in ("plain", "no page", "workers", "previous agent"):
            kernels[name] = server.request("api/kernels", "POST", {"name": "python3"})["id"]
        with_agent(server, kernels["no page"])
        with_agent(
            server, kernels["workers"], code=WORKERS.format(period=args.period, life=args.life)
        )
        with_agent(server, kernels["previous agent"], modules=previous_modules(args.ref))
        if not args.no_page:
            page = subprocess.Popen(
                [
                    "node",
                    str(ROOT / "bench" / "quiet-page.mjs"),
                    "--url",
                    f"{server.base}lab/tree/quiet.ipynb?token={server.token}",
                    "--seconds",
                    str(int(args.settle + args.window + 120)),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            line = page.stdout.readline().strip()
            if not line.startswith("ready "):
                raise RuntimeError(f"the page did not get ready: {line!r}")
            kernels["page"] = line.split()[1]
        for name, kernel_id in kernels.items():
            listeners[name] = Listener(server.connection_file(kernel_id))
        time.sleep(args.settle)
        for listener in listeners.values():
            listener.start_window()
        started = time.monotonic()
        time.sleep(args.window)
        window = time.monotonic() - started
        now = datetime.now(timezone.utc)
        activity = {
            k["id"]: (
                now - datetime.fromisoformat(k["last_activity"].replace("Z", "+00:00"))
            ).total_seconds()
            for k in server.get("api/kernels")
        }
        rows = []
        for name, listener in listeners.items():
            kernel_id = kernels[name]
            rows.append(
                {
                    "kernel": name,
                    "messages": listener.messages,
                    "bytes": listener.bytes,
                    "messagesPerHour": round(listener.messages * 3600 / window, 1),
                    "bytesPerHour": round(listener.bytes * 3600 / window),
                    "kinds": listener.kinds,
                    "lastActivityAgeS": round(activity.get(kernel_id, float("nan")), 1),
                }
            )
        changes = 2 * window / args.period
        result = {
            "agentVersion": kd.AGENT_VERSION,
            "previousAgent": args.ref,
            "commit": subprocess.run(
                ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
            ).stdout.strip(),
            "machine": f"{os.cpu_count()} cores",
            "windowS": round(window, 1),
            "settleS": args.settle,
            "workerChanges": round(changes, 1),
            "rows": rows,
        }
        print(f"window {window:.0f} s after {args.settle:.0f} s of settling")
        print(f"{'kernel':16} {'msgs':>6} {'bytes':>9} {'msgs/h':>8} {'bytes/h':>10} {'idle s':>7}")
        for row in rows:
            print(
                f"{row['kernel']:16} {row['messages']:6d} {row['bytes']:9d} "
                f"{row['messagesPerHour']:8.1f} {row['bytesPerHour']:10d} "
                f"{row['lastActivityAgeS']:7.1f}  {row['kinds']}"
            )
        print(f"workers: {changes:.0f} changes in the window (a child started, one ended)")
        for row in rows:
            goal = {"page": 0, "no page": 0}.get(row["kernel"])
            if goal is not None:
                met = "met" if row["messages"] == goal else "missed"
                print(f"goal {row['kernel']}: 0 messages -> {row['messages']} ({met})")
        workers = next(r for r in rows if r["kernel"] == "workers")
        ratio = workers["messages"] / changes if changes else float("nan")
        print(f"goal workers: one message per change -> {ratio:.2f} per change")
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.out}")
    finally:
        for listener in listeners.values():
            listener.close()
        if page is not None:
            page.kill()
            page.wait()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
