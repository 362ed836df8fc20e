#!/usr/bin/env python3
"""Record real kernel sessions for replay (issue 15): every comm message of the agent, with
timings, as JSON lines that the replay kernel (test/ui/replay_kernel) plays back to the browser.

Each scenario is a Python file in the "percent" format: cells separated by lines starting with
``# %%``, the module docstring (or the comment lines before the first ``# %%``) its description.
A cell header may carry a title and flags in brackets: ``# %% training [raises]`` (the cell must
fail: an error in it is expected), ``[raises on cuda]`` (expected to fail only with
``--device cuda``). Scenarios read the device from the environment variable
``GPU_HYGIENE_DEVICE`` (``cuda:0`` or ``cpu``), which this script sets in the kernel (with
``--device cpu`` it also hides every CUDA device), and size themselves by it.

For each scenario the script starts a real kernel through test/agent/kernel_driver.py's
``Kernel`` (the Ultralytics-offline environment of the GPU check), sends the agent the way the
browser does (one silent execute request), opens the comm as the browser does (``comm_open``
with a ``configure`` of ``--interval-ms``), waits for ``hello`` and the first inventory, then
runs the scenario's cells one by one as user cells (``--gap-s`` of idle kernel before each,
waiting after each for the inventory the agent sends for it), and records ``--tail-s`` more of
idle kernel. The recording (its format: test/recordings/README.md) is
``<out>/<scenario>.jsonl``:

- line 1, the header: format, version, scenario, description, recorded (ISO 8601 UTC), ``t0``
  (epoch seconds at the recording's start) and ``env`` (the kernel's Python, torch and
  Ultralytics versions, the agent's, the device's name and total bytes, torch's
  per-process memory fraction: 1.0 when uncapped, null where CUDA was not initialised);
- then one event a line, ``at`` in seconds since ``t0`` (monotonic clock, taken as this process
  receives or sends the message): every comm message of the agent's comm in both directions
  (``dir`` "out": kernel to browser, as sent; "in": browser to kernel, the ``comm_open``'s data
  first), each user cell's ``execute`` start (sent) and end (its reply received: execution
  count, status, ``error`` as "ename: evalue"), and marks.

Marks: a scenario prints a line ``@@mark <name> <JSON object>`` (the object optional) to
stdout; the recorder turns each such line of a user cell's output into ``{"at", "event":
"mark", "name", ...fields}``. The line stays in the cell's output as printed (a recording holds
no outputs, only the mark). The recorder adds two marks itself: ``budget`` (the scenario was
stopped at ``--budget-s``) and ``kernel-died`` (the kernel process ended during a cell).

``--budget-s``: a scenario still running after that many seconds (from its kernel's start) is
interrupted (SIGINT through the kernel manager: the running cell ends with KeyboardInterrupt,
recorded), its later cells are skipped, and what was recorded is written.

Needs ipykernel, jupyter_client, IPython (and pynvml with ``--device cuda``, ultralytics for the
scenarios that import it) where the kernels run; ``--wheels DIR`` installs what is missing the
way scripts/gpu_check.py does (``ensure_packages``). No torch in this process: it creates no CUDA
context of its own.

Exit status: 0 when every scenario ran to its end with the errors its cells expect, 1 otherwise
(a budget stop, an unexpected error or a missing one, a hang), 2 for bad arguments.
"""

import argparse
import ast
import datetime
import importlib.metadata
import importlib.util
import json
import queue
import re
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "agent"))
sys.path.insert(0, str(ROOT / "scripts"))

import checks  # noqa: E402 -- needs the path above
import kernel_driver as kd  # noqa: E402

RECORDINGS = ROOT / "test" / "recordings"
SCENARIOS = RECORDINGS / "scenarios"
FORMAT = "gpu-hygiene-recording"
VERSION = 1
MARK = "@@mark "
CELL_SEPARATOR = re.compile(r"^# %%(.*)$", re.M)
FLAGS = re.compile(r"\[([^\]]*)\]")
DEVICE_ENV = "GPU_HYGIENE_DEVICE"
# how long an interrupted cell has to end, and the agent to send a cell's inventory (s)
INTERRUPT_GRACE_S = 30.0
INVENTORY_WAIT_S = 30.0


class Cell(NamedTuple):
    """One cell of a scenario: ``index`` (0-based), ``title`` (the header's text), ``raises``
    (None: must not fail; "always"; "cuda": only with ``--device cuda``) and ``code``."""

    index: int
    title: str
    raises: object
    code: str


class Scenario(NamedTuple):
    name: str
    path: Path
    description: str
    cells: list


def parse_scenario(path):
    """The ``Scenario`` of a percent-format file (``Path``). Raises ValueError for a file whose
    text before the first ``# %%`` is more than a docstring and comments, or has no cell."""
    text = Path(path).read_text(encoding="utf-8")
    parts = CELL_SEPARATOR.split(text)
    preamble, pairs = parts[0], list(zip(parts[1::2], parts[2::2]))
    tree = ast.parse(preamble)
    docstring = ast.get_docstring(tree)
    if len(tree.body) > (1 if docstring is not None else 0):
        raise ValueError(f"{path}: code before the first '# %%' (only a docstring may be there)")
    if docstring is None:
        comments = [line[1:].strip() for line in preamble.splitlines() if line.startswith("#")]
        docstring = " ".join(c for c in comments if c)
    description = " ".join(docstring.split())
    cells = []
    for header, body in pairs:
        flags = [f.split() for f in FLAGS.findall(header)]
        raises = None
        for words in flags:
            if words[:1] == ["raises"]:
                raises = "cuda" if words[1:] == ["on", "cuda"] else "always"
        title = FLAGS.sub("", header).strip()
        code = body.strip("\n")
        if code.strip():
            cells.append(Cell(len(cells), title, raises, code + "\n"))
    if not cells:
        raise ValueError(f"{path}: no cell (cells start at lines '# %%')")
    return Scenario(Path(path).stem, Path(path), description, cells)


def find_scenarios(folder, only):
    """The scenarios to record: every ``*.py`` of ``folder`` in name order, or those ``only``
    names (a scenario name in ``folder``, or the path of a scenario file)."""
    folder = Path(folder)
    if not only:
        return [parse_scenario(p) for p in sorted(folder.glob("*.py"))]
    chosen = []
    for item in only:
        path = Path(item)
        if not (path.suffix == ".py" and path.exists()):
            path = folder / f"{item}.py"
        if not path.exists():
            known = ", ".join(p.stem for p in sorted(folder.glob("*.py")))
            raise SystemExit(f"no scenario {item!r} (in {folder}: {known})")
        chosen.append(parse_scenario(path))
    return chosen


class Recording:
    """The events of one scenario's recording, as they happen: comm messages of the agent's
    comm(s) in both directions, cells, marks. Hooks a ``kernel_driver.Kernel``: its client's
    IOPub reads (every message the driver pumps passes here first) and its shell sends."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.events = []
        self.t0 = None
        self.m0 = None
        self.stopped = False
        self.comm_ids = set()
        self.cell_msg = None  # msg_id of the user cell running now
        self.cell_text = ""  # its stdout not yet split into lines
        client = kernel.kc
        read = client.get_iopub_msg
        send = kernel.send_shell

        def get_iopub_msg(*args, **kwargs):
            msg = read(*args, **kwargs)
            self._on_iopub(msg)
            return msg

        def send_shell(msg_type, content):
            self._on_send(msg_type, content)
            return send(msg_type, content)

        client.get_iopub_msg = get_iopub_msg
        kernel.send_shell = send_shell

    # ---- clock and events

    def start(self):
        self.t0 = time.time()
        self.m0 = time.monotonic()

    def now(self):
        return round(time.monotonic() - self.m0, 6)

    def add(self, event):
        if self.m0 is not None and not self.stopped:
            self.events.append({"at": self.now(), **event})

    def out(self, kind=None):
        """The "out" messages recorded so far (their data), optionally of one type."""
        return [
            e["data"]
            for e in self.events
            if e.get("dir") == "out" and (kind is None or e["data"].get("type") == kind)
        ]

    def _on_send(self, msg_type, content):
        if msg_type == "comm_open" and content.get("target_name") == kd.TARGET:
            self.comm_ids.add(content["comm_id"])
            self.add({"dir": "in", "data": content.get("data") or {}})
        elif msg_type == "comm_msg" and content.get("comm_id") in self.comm_ids:
            self.add({"dir": "in", "data": content.get("data") or {}})

    def _on_iopub(self, msg):
        kind = msg["msg_type"]
        content = msg["content"]
        if kind == "comm_msg" and content.get("comm_id") in self.comm_ids:
            self.add({"dir": "out", "data": content.get("data")})
        elif (
            kind == "stream"
            and content.get("name") == "stdout"
            and self.cell_msg is not None
            and msg["parent_header"].get("msg_id") == self.cell_msg
        ):
            self.cell_text += content.get("text", "")
            *lines, self.cell_text = self.cell_text.split("\n")
            for line in lines:
                self._mark(line)

    def _mark(self, line):
        if not line.startswith(MARK):
            return
        name, _, rest = line[len(MARK) :].strip().partition(" ")
        fields = {}
        if rest.strip():
            try:
                fields = json.loads(rest)
            except ValueError:
                fields = {"text": rest.strip()}
            if not isinstance(fields, dict):
                fields = {"value": fields}
        event = {"event": "mark", "name": name}
        event.update((k, v) for k, v in fields.items() if k not in ("at", "event", "name"))
        self.add(event)

    def end_cell(self):
        """The running cell's output ended: its last line counts even without a newline."""
        if self.cell_text:
            self._mark(self.cell_text)
        self.cell_text = ""
        self.cell_msg = None

    # ---- the file

    def write(self, path, header):
        """Write the header and the events (in time order) to ``path``; returns its size."""
        lines = [json.dumps(header, ensure_ascii=False, separators=(",", ":"))]
        events = sorted(self.events, key=lambda e: e["at"])  # stable: ties keep their order
        lines += [json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in events]
        text = "\n".join(lines) + "\n"
        Path(path).write_text(text, encoding="utf-8")
        return len(text.encode("utf-8"))


class Session:
    """One scenario in one fresh kernel, recorded."""

    def __init__(self, scenario, args):
        self.scenario = scenario
        self.args = args
        self.cuda = args.device == "cuda"
        self.problems = []  # what makes the exit status 1
        self.results = []  # (cell, status, error text, seconds)
        env = dict(checks.kernel_environment())
        env[DEVICE_ENV] = "cuda:0" if self.cuda else "cpu"
        if not self.cuda:
            env["CUDA_VISIBLE_DEVICES"] = ""
        self.started = time.monotonic()
        self.kernel = kd.Kernel(env=env)
        self.recording = Recording(self.kernel)

    @property
    def deadline(self):
        return self.started + self.args.budget_s

    def wait_out(self, kind, count, timeout):
        """Pump until ``count`` "out" messages of ``kind`` were recorded (bool: they were)."""
        end = time.monotonic() + timeout
        while len(self.recording.out(kind)) < count:
            if time.monotonic() >= end:
                return False
            self.kernel.pump(0.05)
        return True

    def idle(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.kernel.pump(min(0.05, max(0.0, end - time.monotonic())))

    def run(self):
        rec = self.recording
        self.kernel.inject({"sampleIntervalMs": self.args.interval_ms})
        rec.start()
        self.kernel.open_comm(self.args.interval_ms, wait=False)
        if not (self.wait_out("hello", 1, 60) and self.wait_out("inventory", 1, 60)):
            self.problems.append("the agent sent no hello and inventory in 60 s")
            return
        for cell in self.scenario.cells:
            if time.monotonic() >= self.deadline:
                self.stop_for_budget(cell, running=False)
                break
            self.idle(self.args.gap_s)
            if not self.run_cell(cell):
                break
        else:
            self.idle(self.args.tail_s)
            return
        self.idle(min(self.args.tail_s, 2.0))

    def stop_for_budget(self, cell, running):
        rec = self.recording
        rec.add(
            {
                "event": "mark",
                "name": "budget",
                "budgetS": self.args.budget_s,
                "cell": cell.index,
                "running": running,
            }
        )
        skipped = len(self.scenario.cells) - cell.index - (1 if running else 0)
        self.problems.append(
            f"stopped at --budget-s {self.args.budget_s:g} in cell {cell.index}"
            f" ({skipped} cell(s) not run)"
        )

    def run_cell(self, cell):
        """Run one cell as a user cell; False when the scenario must stop (budget, hang)."""
        rec, kernel = self.recording, self.kernel
        inventories = len(rec.out("inventory"))
        rec.add({"event": "execute", "phase": "start", "cell": cell.index, "code": cell.code})
        began = time.monotonic()
        msg_id = kernel.kc.execute(cell.code, silent=False, store_history=True, allow_stdin=False)
        rec.cell_msg = msg_id
        reply = None
        interrupted_at = None
        while reply is None or msg_id not in kernel.idle:
            now = time.monotonic()
            if interrupted_at is None and now >= self.deadline:
                self.stop_for_budget(cell, running=True)
                kernel.km.interrupt_kernel()
                interrupted_at = now
            if not kernel.km.is_alive():
                self.problems.append(f"the kernel died in cell {cell.index}")
                rec.add({"event": "mark", "name": "kernel-died", "cell": cell.index})
                rec.end_cell()
                return False
            if interrupted_at is not None and now - interrupted_at > INTERRUPT_GRACE_S:
                self.problems.append(
                    f"cell {cell.index} did not end {INTERRUPT_GRACE_S:g} s after the interrupt"
                )
                rec.end_cell()
                return False
            if reply is None:
                try:
                    candidate = kernel.kc.get_shell_msg(timeout=0.005)
                except queue.Empty:
                    candidate = None
                if candidate is not None and candidate["parent_header"].get("msg_id") == msg_id:
                    reply = candidate["content"]
                    end = {
                        "event": "execute",
                        "phase": "end",
                        "cell": cell.index,
                        "executionCount": reply.get("execution_count"),
                        "status": "ok" if reply.get("status") == "ok" else "error",
                    }
                    if reply.get("status") != "ok":
                        end["error"] = f"{reply.get('ename', '')}: {reply.get('evalue', '')}"
                    rec.add(end)
            kernel.pump(0.02)
        rec.end_cell()
        seconds = time.monotonic() - began
        error = (
            None if reply.get("status") == "ok" else f"{reply.get('ename')}: {reply.get('evalue')}"
        )
        self.results.append((cell, reply.get("status"), error, seconds))
        expected = cell.raises == "always" or (cell.raises == "cuda" and self.cuda)
        if interrupted_at is not None:
            self.wait_out("inventory", inventories + 1, INVENTORY_WAIT_S)
            return False
        if (error is not None) != expected:
            self.problems.append(
                f"cell {cell.index} ({cell.title or 'untitled'}): "
                + (f"unexpected {error[:200]}" if error else "no error, one was expected")
            )
        if not self.wait_out("inventory", inventories + 1, INVENTORY_WAIT_S):
            self.problems.append(f"no inventory after cell {cell.index}")
        return True

    def environment(self):
        """The header's ``env``: read in the kernel after the scenario, by a silent request
        (no cell, nothing in the user namespace). torch and CUDA are asked only when the
        scenario imported torch and initialised CUDA itself."""
        expression = (
            "(lambda sys, t: {'python': sys.version.split()[0],"
            " 'torch': getattr(t, '__version__', None),"
            " 'ultralytics': getattr(sys.modules.get('ultralytics'), '__version__', None),"
            " 'cuda': bool(t is not None and t.cuda.is_initialized()),"
            " 'name': t.cuda.get_device_name(0) if t is not None and t.cuda.is_initialized()"
            " else None,"
            " 'total': t.cuda.get_device_properties(0).total_memory"
            " if t is not None and t.cuda.is_initialized() else None,"
            " 'fraction': t.cuda.get_per_process_memory_fraction(0)"
            " if t is not None and t.cuda.is_initialized()"
            " and hasattr(t.cuda, 'get_per_process_memory_fraction') else None})"
            "(__import__('sys'), __import__('sys').modules.get('torch'))"
        )
        try:
            if not self.kernel.km.is_alive():
                raise RuntimeError("the kernel is dead")
            result = self.kernel.execute(
                "", silent=True, store_history=False, user_expressions={"env": expression},
                timeout=30,
            )  # fmt: skip
            facts = result.user_expression("env")
        except Exception as exc:  # a kernel that died or hangs: the header says what is known
            self.problems.append(f"kernel environment not read: {exc}"[:300])
            facts = {}
        hello = (self.recording.out("hello") or [{}])[0]
        devices = hello.get("devices") or []
        ultralytics = facts.get("ultralytics")
        if ultralytics is None:
            try:
                ultralytics = importlib.metadata.version("ultralytics")
            except importlib.metadata.PackageNotFoundError:
                ultralytics = None
        return {
            "python": facts.get("python") or hello.get("python"),
            "torch": facts.get("torch") or hello.get("torch"),
            "ultralytics": ultralytics,
            "agent": hello.get("agentVersion") or kd.AGENT_VERSION,
            "device": facts.get("name") or (devices[0]["name"] if devices else "cpu"),
            "totalBytes": facts.get("total") or (devices[0]["total"] if devices else None),
            "memoryFraction": facts.get("fraction"),
        }

    def finish(self, out_dir):
        """Stop recording, write the file; returns (path, bytes, seconds recorded)."""
        rec = self.recording
        if rec.m0 is None:
            rec.start()
        seconds = rec.now()
        rec.stopped = True
        header = {
            "format": FORMAT,
            "version": VERSION,
            "scenario": self.scenario.name,
            "description": self.scenario.description,
            "recorded": datetime.datetime.fromtimestamp(rec.t0, datetime.timezone.utc)
            .isoformat(timespec="seconds")
            .replace("+00:00", "Z"),
            "t0": rec.t0,
            "env": self.environment(),
        }
        path = Path(out_dir) / f"{self.scenario.name}.jsonl"
        size = rec.write(path, header)
        return path, size, seconds

    def shutdown(self):
        try:
            self.kernel.shutdown()
        except Exception as exc:
            print(f"  (kernel shutdown: {exc})", file=sys.stderr)


def record(scenario, args):
    """Record one scenario; returns (path, problems)."""
    print(f"== {scenario.name} ({len(scenario.cells)} cells, {args.device})", flush=True)
    session = Session(scenario, args)
    try:
        try:
            session.run()
        except KeyboardInterrupt:
            session.problems.append("interrupted from the keyboard")
            raise
        except Exception as exc:  # record what there is, then say what broke
            session.problems.append(f"{type(exc).__name__}: {exc}"[:300])
        finally:
            path, size, seconds = session.finish(args.out)
    finally:
        session.shutdown()
    rec = session.recording
    for cell, status, error, cell_s in session.results:
        print(
            f"  cell {cell.index} {cell.title or ''!s:<32} {status:<6} {cell_s:6.1f} s"
            + (f"  {error[:100]}" if error else "")
        )
    per_minute = size / (seconds / 60) if seconds > 0 else 0
    marks = sum(1 for e in rec.events if e.get("event") == "mark")
    print(
        f"  {path}: {size} bytes, {seconds:.1f} s recorded ({per_minute / 1024:.0f} KiB a minute);"
        f" {len(rec.out())} out, {sum(1 for e in rec.events if e.get('dir') == 'in')} in,"
        f" {len(rec.out('sample'))} samples, {len(rec.out('inventory'))} inventories,"
        f" {marks} marks",
        flush=True,
    )
    for problem in session.problems:
        print(f"  PROBLEM: {problem}", flush=True)
    return path, session.problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", default=str(RECORDINGS), help="folder of the recordings (default test/recordings)"
    )
    parser.add_argument(
        "--scenarios",
        default=str(SCENARIOS),
        help="folder of the scenarios (default test/recordings/scenarios)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        help="scenarios to record (names in --scenarios, or paths of scenario files); default all",
    )
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument(
        "--interval-ms",
        type=int,
        default=500,
        help="the sampler period the comm asks for (default 500)",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=180.0,
        help="stop a scenario running past this many seconds (default 180)",
    )
    parser.add_argument(
        "--gap-s", type=float, default=1.0, help="idle kernel before each cell (default 1)"
    )
    parser.add_argument(
        "--tail-s",
        type=float,
        default=3.0,
        help="idle kernel recorded after the last cell (default 3)",
    )
    parser.add_argument(
        "--wheels",
        help="wheel folder for missing packages (installed offline, as scripts/gpu_check.py does)",
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args(argv)

    scenarios = find_scenarios(args.scenarios, args.only)
    if args.list:
        for s in scenarios:
            print(f"{s.name}: {len(s.cells)} cells. {s.description}")
        return 0
    needed = ("ipykernel", "jupyter_client", "IPython")
    if args.device == "cuda":
        needed += ("pynvml",)
    if any("ultralytics" in c.code for s in scenarios for c in s.cells):
        needed += ("ultralytics",)
    if args.wheels or any(importlib.util.find_spec(m) is None for m in needed):
        from gpu_check import ensure_packages

        ensure_packages(args.wheels, needed)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    failed = []
    for scenario in scenarios:
        _path, problems = record(scenario, args)
        if problems:
            failed.append(scenario.name)
    total = time.monotonic() - started
    print(
        f"{len(scenarios)} scenario(s) in {total:.0f} s"
        + (f"; with problems: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
