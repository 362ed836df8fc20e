"""The replay kernel (issue 15, test tooling): a real IPython kernel (ipykernel) that stands in
for a GPU kernel, because there is no GPU on the machines where the browser tests run. It plays a
recorded session of the agent (``test/recordings/<name>.jsonl``, written on a GPU machine by
``scripts/record_session.py``) back to the browser through the real comm, so the extension shows
what it showed during the recorded session.

- The browser's agent install (the silent execute request whose code is the agent loader,
  ``exec("# jupyterlab-gpu-hygiene loader...``) is answered ``ok`` without running it: no agent
  runs here.
- The kernel registers the comm target ``jupyterlab_gpu_hygiene.v1`` itself. It answers every
  ``comm_open`` at once with a ``hello``: the hello of the recording named by the environment
  variable ``GPU_HYGIENE_REPLAY`` when set, else a neutral one (this kernel's Python and pid, no
  torch, no NVML, no devices, ``nvmlError`` saying that nothing was replayed yet: the gauge shows
  "No GPU"). The browser waits for that hello right after the kernel starts, before any cell.
- ``%gpu_replay <name> [--speed S]`` (a line magic; ``<name>`` is a recording of the folder
  ``GPU_HYGIENE_RECORDINGS``, default test/recordings, or the path of a ``.jsonl`` file) sends the
  recording's "out" messages through every open comm of the target, each at its recorded time
  after the first divided by ``S`` (default 1), and blocks until the last one was sent, so the
  notebook shows the cell running (kernel busy) as the recorded cells did; then it prints
  "replayed N messages of <name> in X s". Every message's ``t`` (``sample``, ``inventory``,
  ``gpuProcesses``) is shifted by (replay start - the recording's first ``t``): the browser
  sees current times, spaced as recorded (at a speed above 1 the times run ahead of the clock;
  the browser only compares them with each other). Everything else, ``sample.busy`` included,
  is sent as recorded. An interrupt stops the replay (KeyboardInterrupt in the cell).
- Browser messages on the comm (``configure``, ``inventory`` requests) are accepted and ignored:
  recorded inventories come at their recorded times.

A second ``hello`` on one comm: the connection (src/connection.ts) applies it like the first,
and the model (src/model.ts ``apply``) replaces its hello and stays ``ready`` but keeps what it
has (samples, inventories, toasts shown). So a recording's hello is sent first, unless it equals
the last hello sent on that comm (``GPU_HYGIENE_REPLAY`` named this recording), and the browser
shows exactly the recorded session when it is the first replay since the kernel started (the
neutral hello adds no samples nor inventory). A second replay in one kernel adds to the first;
restart the kernel between replays (a restart resets the browser's model).
"""

import argparse
import json
import os
import re
import shlex
import sys
import time
from pathlib import Path

from ipykernel.ipkernel import IPythonKernel
from ipykernel.kernelapp import IPKernelApp

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[4]  # <root>/test/ui/replay_kernel/kernels/gpu-hygiene-replay
TARGET = "jupyterlab_gpu_hygiene.v1"
FORMAT = "gpu-hygiene-recording"
# the start of the browser's install code: exec(<the loader as a JSON string>, ...)
LOADER_START = 'exec("# jupyterlab-gpu-hygiene loader.'
LIMITS = ROOT / "src" / "agent" / "gpu_hygiene_agent" / "limits.py"


def _agent_constant(name, default):
    """The agent's ``PROTOCOL`` / ``AGENT_VERSION`` from its limits.py (default when absent)."""
    try:
        found = re.search(rf"^{name} = (.+)$", LIMITS.read_text(encoding="utf-8"), re.M)
        return json.loads(found.group(1)) if found else default
    except (OSError, ValueError):
        return default


PROTOCOL = _agent_constant("PROTOCOL", 2)


def recordings_folder():
    return Path(os.environ.get("GPU_HYGIENE_RECORDINGS") or ROOT / "test" / "recordings")


def recording_path(name):
    """The file of recording ``name``: a path to a ``.jsonl`` file, or a name in the folder."""
    path = Path(name)
    if path.suffix == ".jsonl" and path.exists():
        return path
    return recordings_folder() / f"{name}.jsonl"


def read_recording(name):
    """(header, [(at, data)] of the "out" messages in time order) of a recording; raises
    ValueError for a file that is not one."""
    path = recording_path(name)
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0]) if lines else {}
    if header.get("format") != FORMAT or header.get("version") != 1:
        raise ValueError(f"{path}: not a {FORMAT} version 1 file")
    out = []
    for line in lines[1:]:
        if line.strip():
            event = json.loads(line)
            if event.get("dir") == "out" and isinstance(event.get("data"), dict):
                out.append((float(event["at"]), event["data"]))
    out.sort(key=lambda pair: pair[0])
    return header, out


def neutral_hello():
    return {
        "protocol": PROTOCOL,
        "type": "hello",
        "agentVersion": _agent_constant("AGENT_VERSION", "replay"),
        "python": sys.version.split()[0],
        "pid": os.getpid(),
        "torch": None,
        "nvml": False,
        "nvmlError": "replay kernel: no recording replayed yet",
        "devices": [],
    }


def first_hello():
    """The hello a ``comm_open`` is answered with (see the module docstring)."""
    name = os.environ.get("GPU_HYGIENE_REPLAY")
    if name:
        try:
            _header, out = read_recording(name)
            for _at, data in out:
                if data.get("type") == "hello":
                    return data
        except (OSError, ValueError):
            pass
    return neutral_hello()


def shifted(data, offset):
    """``data`` with its ``t`` (epoch seconds) moved by ``offset`` seconds, when it has one."""
    t = data.get("t")
    if isinstance(t, (int, float)) and not isinstance(t, bool):
        return {**data, "t": t + offset}
    return data


class ReplayKernel(IPythonKernel):
    """IPython kernel with the agent's comm target and the ``%gpu_replay`` magic."""

    implementation = "gpu-hygiene-replay"
    implementation_version = "1.0"
    banner = "GPU hygiene replay kernel: %gpu_replay <recording> plays a recorded GPU session"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.replay_comms = {}  # comm_id -> comm
        self.last_hello = {}  # comm_id -> the hello last sent on it
        self.comm_manager.register_target(TARGET, self._comm_opened)
        self.shell.register_magic_function(self.gpu_replay, "line", "gpu_replay")

    async def do_execute(
        self, code, silent, store_history=True, user_expressions=None, allow_stdin=False, **kw
    ):
        if silent and code.lstrip().startswith(LOADER_START):
            return {
                "status": "ok",
                "execution_count": self.execution_count,
                "payload": [],
                "user_expressions": {},
            }
        return await super().do_execute(
            code, silent, store_history, user_expressions, allow_stdin, **kw
        )

    # ---- the comm

    def _comm_opened(self, comm, _msg):
        comm_id = comm.comm_id
        self.replay_comms[comm_id] = comm
        comm.on_msg(lambda _msg: None)  # configure / inventory requests: ignored
        comm.on_close(lambda _msg: self._forget(comm_id))
        self._send(comm_id, first_hello())

    def _forget(self, comm_id):
        self.replay_comms.pop(comm_id, None)
        self.last_hello.pop(comm_id, None)

    def _send(self, comm_id, data):
        comm = self.replay_comms.get(comm_id)
        if comm is None:
            return False
        try:
            comm.send(data)
        except Exception:
            self._forget(comm_id)
            return False
        if data.get("type") == "hello":
            self.last_hello[comm_id] = data
        return True

    # ---- the magic

    def gpu_replay(self, line):
        """%gpu_replay <recording> [--speed S]: play a recorded GPU session through the comm."""
        parser = argparse.ArgumentParser(prog="%gpu_replay", add_help=False)
        parser.add_argument("name")
        parser.add_argument("--speed", type=float, default=1.0)
        try:
            args = parser.parse_args(shlex.split(line))
        except SystemExit:
            print(parser.format_usage().strip(), file=sys.stderr)
            return
        if not args.speed > 0:
            print("%gpu_replay: --speed must be above 0", file=sys.stderr)
            return
        try:
            _header, out = read_recording(args.name)
        except (OSError, ValueError) as exc:
            print(f"%gpu_replay: {exc}", file=sys.stderr)
            return
        if not self.replay_comms:
            print(
                "%gpu_replay: no comm of the extension is open (nothing to replay to)",
                file=sys.stderr,
            )
            return
        times = [d["t"] for _at, d in out if isinstance(d.get("t"), (int, float))]
        start_wall, start = time.time(), time.monotonic()
        offset = start_wall - times[0] if times else 0.0
        first_at = out[0][0] if out else 0.0
        sent = 0
        try:
            for at, data in out:
                due = start + (at - first_at) / args.speed
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                comms = list(self.replay_comms)
                if data.get("type") == "hello":
                    comms = [c for c in comms if self.last_hello.get(c) != data]
                    if not comms:
                        continue
                message = shifted(data, offset)
                for comm_id in comms:
                    self._send(comm_id, message)
                sent += 1
        except KeyboardInterrupt:
            print(f"%gpu_replay: interrupted after {sent} of {len(out)} messages", file=sys.stderr)
            raise
        name = Path(args.name).stem if args.name.endswith(".jsonl") else args.name
        print(f"replayed {sent} messages of {name} in {time.monotonic() - start:.1f} s")


if __name__ == "__main__":
    IPKernelApp.launch_instance(kernel_class=ReplayKernel)
