"""Drive a real ipykernel through jupyter_client, the way the browser does (no pytest here: the
agent tests' conftest.py and scripts/gpu_check.py both import it).

- ``Kernel``: one real kernel process with a blocking client; it pumps IOPub itself and files
  every message by parent request, comm messages separately.
- ``Kernel.inject``: sends the agent exactly like the browser (``src/agent-chunk.ts``): one
  silent execute request (``silent=True, store_history=False``) whose code is
  ``exec(<loader>, {"SOURCE": <payload>, "CONFIG": <config JSON>})`` with the three texts
  written as JSON string literals (``JSON.stringify`` in the browser, ``json.dumps`` here); the
  payload is the JSON list of the agent package's modules (``agent_json``), zlib-compressed and
  base64-encoded the way ``scripts/embed-agent.mjs`` writes it (``agent_source``).
- ``load_agent``: the agent package loaded in this process as the loader registers it (under a
  private name, not installed), for the in-process tests.
- ``Kernel.open_comm``: acts as the browser side of the comm (``comm_open`` to the target over
  the shell channel, with ``configure`` data); ``Comm.messages`` are the ``comm_msg`` bodies the
  kernel published on IOPub for it.
- ``Kernel.run``: a user cell (``silent=False, store_history=True``) and its outputs.
- ``Kernel.attach``: the same blocking client on a kernel another program started (a Jupyter
  server's, by its connection file), which it neither restarts nor shuts down.
- ``compile_cleanup`` / ``compile_browser``: the browser's TypeScript compiled to CommonJS for
  node (the cell generators; with ``compile_browser`` also the views of issue 12 and the node
  packages they load, for a machine without node_modules); ``gpu_views`` runs those views.
"""

import ast
import base64
import functools
import importlib.util
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import time
import types
import uuid
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AGENT_DIR = ROOT / "src" / "agent" / "gpu_hygiene_agent"
# the package's manifest (MODULES, its docstring); scripts/gpu_check.py names its git blob
AGENT_PATH = AGENT_DIR / "__init__.py"
LIMITS_PATH = AGENT_DIR / "limits.py"
LOADER_PATH = ROOT / "src" / "agent" / "loader.py"
CASES_DIR = Path(os.environ.get("GPU_HYGIENE_CASES", ROOT / "test" / "cases"))
TARGET = "jupyterlab_gpu_hygiene.v1"
MODULE = "_jupyterlab_gpu_hygiene_agent"
THREAD = "gpu-hygiene-sampler"


def _manifest():
    """The package's ``MODULES`` tuple, read from ``__init__.py`` without running it."""
    for node in ast.parse(AGENT_PATH.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [
            "MODULES"
        ]:
            return tuple(ast.literal_eval(node.value))
    raise LookupError(f"{AGENT_PATH} defines no MODULES")


# the submodules of the agent package in dependency order (its MODULES, read once)
MODULES = _manifest()
# the comm protocol version the agent speaks (its PROTOCOL constant)
PROTOCOL = int(re.search(r"^PROTOCOL = (\d+)$", LIMITS_PATH.read_text(), re.M).group(1))
AGENT_VERSION = re.search(r'^AGENT_VERSION = "(.+)"$', LIMITS_PATH.read_text(), re.M).group(1)
OUTPUT_TYPES = {
    "stream",
    "error",
    "execute_result",
    "display_data",
    "update_display_data",
    "clear_output",
}


def agent_modules():
    """The payload's modules: [(name, source text)] in load order, ``__init__`` last."""
    names = [*MODULES, "__init__"]
    return [(name, (AGENT_DIR / f"{name}.py").read_text(encoding="utf-8")) for name in names]


def agent_json(modules=None):
    """The JSON list of [name, text] pairs of ``modules`` (default ``agent_modules()``), written
    like ``JSON.stringify`` (str): what the payload carries."""
    pairs = [list(pair) for pair in (modules if modules is not None else agent_modules())]
    return json.dumps(pairs, ensure_ascii=False, separators=(",", ":"))


def encode_payload(text):
    """The payload for a JSON text (str): its UTF-8 bytes zlib-compressed at level 9 and
    base64-encoded, as ``scripts/embed-agent.mjs`` writes it and ``loader.py`` reads it."""
    return base64.b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii")


def decode_payload(payload):
    """The JSON text a payload carries (str)."""
    return zlib.decompress(base64.b64decode(payload)).decode("utf-8")


def agent_source(modules=None):
    """The agent payload as the browser sends it (str): ``agent_json(modules)``, compressed and
    encoded (``encode_payload``)."""
    return encode_payload(agent_json(modules))


def loader_source():
    return LOADER_PATH.read_text(encoding="utf-8")


def load_agent(name="_gpu_hygiene_agent_under_test", modules=None):
    """Load the agent package in this process the way the loader registers it, under the
    private package name ``name`` (``sys.modules`` entries ``name`` and ``name.<module>``),
    without installing it; returns the package object. A package of that name loaded before is
    replaced."""
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        del sys.modules[key]
    package = types.ModuleType(name)
    package.__path__ = []
    package.__package__ = name
    sys.modules[name] = package
    for sub, text in modules if modules is not None else agent_modules():
        path = str(AGENT_DIR / f"{sub}.py")
        if sub == "__init__":
            exec(compile(text, path, "exec"), package.__dict__)
            continue
        module = types.ModuleType(f"{name}.{sub}")
        module.__package__ = name
        module.__file__ = path
        sys.modules[module.__name__] = module
        exec(compile(text, path, "exec"), module.__dict__)
        setattr(package, sub, module)
    return package


def _literal(text):
    # JSON string literals are valid Python string literals; ensure_ascii=False mirrors
    # JSON.stringify, which leaves non-ASCII characters as they are.
    return json.dumps(text, ensure_ascii=False)


def install_code(config=None, source=None, loader=None):
    """The code of the browser's silent install request (see src/agent-chunk.ts). ``source``:
    the payload (default ``agent_source()``); with ``loader`` 0.2.0's loader, that version's
    single file text (test_injection replaces an old agent this way)."""
    config_json = json.dumps(config if config is not None else {"sampleIntervalMs": 1000})
    return "exec({}, {{{}: {}, {}: {}}})".format(
        _literal(loader if loader is not None else loader_source()),
        _literal("SOURCE"),
        _literal(source if source is not None else agent_source()),
        _literal("CONFIG"),
        _literal(config_json),
    )


# The install request's user expression, as src/agent-chunk.ts's HELLO_EXPRESSION
# (test_payload.py checks that both say the same): the agent's hello in the execute_reply.
HELLO_EXPRESSION = {
    "jupyterlab_gpu_hygiene_hello": (
        "__import__('sys').modules['_jupyterlab_gpu_hygiene_agent'].hello_now()"
    )
}


class Result:
    """What one execute request produced: ``reply`` (execute_reply content), ``iopub`` (all its
    IOPub messages except status), ``outputs`` (those that a notebook would display)."""

    def __init__(self, reply, iopub):
        self.reply = reply
        self.iopub = iopub
        self.outputs = [m for m in iopub if m["msg_type"] in OUTPUT_TYPES]

    @property
    def execution_count(self):
        return self.reply.get("execution_count")

    @property
    def stdout(self):
        return "".join(
            m["content"]["text"]
            for m in self.outputs
            if m["msg_type"] == "stream" and m["content"]["name"] == "stdout"
        )

    @property
    def stderr(self):
        return "".join(
            m["content"]["text"]
            for m in self.outputs
            if m["msg_type"] == "stream" and m["content"]["name"] == "stderr"
        )

    @property
    def error(self):
        for m in self.outputs:
            if m["msg_type"] == "error":
                return m["content"]
        return None

    def user_expression(self, name):
        """Value of a ``user_expressions`` entry, evaluated back from its text/plain repr."""
        entry = self.reply["user_expressions"][name]
        assert entry["status"] == "ok", entry
        return eval(entry["data"]["text/plain"])  # reprs of plain Python values only


class Comm:
    """Browser side of one comm."""

    def __init__(self, kernel, comm_id):
        self.kernel = kernel
        self.comm_id = comm_id

    def messages(self, kind=None):
        """Bodies (``data``) of the comm_msg messages received so far, optionally of one type."""
        self.kernel.pump(0)
        return [
            m["content"]["data"]
            for m in self.kernel.comm_log
            if m["msg_type"] == "comm_msg"
            and m["content"]["comm_id"] == self.comm_id
            and (kind is None or m["content"]["data"].get("type") == kind)
        ]

    def closed_by_kernel(self):
        self.kernel.pump(0)
        return any(
            m["msg_type"] == "comm_close" and m["content"]["comm_id"] == self.comm_id
            for m in self.kernel.comm_log
        )

    def send(self, data):
        self.kernel.send_shell("comm_msg", {"comm_id": self.comm_id, "data": data})

    def close(self):
        self.kernel.send_shell("comm_close", {"comm_id": self.comm_id, "data": {}})

    def wait_for(self, kind, count=1, timeout=30.0):
        """Wait until ``count`` messages of type ``kind`` arrived; returns them all."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.messages(kind)
            if len(found) >= count:
                return found
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"{count} {kind!r} message(s) expected, got {len(found)}: "
                    f"{[m.get('type') for m in self.messages()]}"
                )
            self.kernel.pump(min(left, 0.2))

    def request_sample(self, timeout=30.0):
        """Send a ``sample`` request (what the page sends when a user opens the gauge's popup
        or the panel) and return the sample that answers it (dict). Between cells the agent
        sends no sample on its own unless this kernel's figures moved."""
        before = len(self.messages("sample"))
        self.send({"protocol": PROTOCOL, "type": "sample"})
        return self.wait_for("sample", before + 1, timeout)[before]

    def busy_samples(self, seconds=1.5):
        """Run a user cell that sleeps ``seconds`` and return the samples the sampler thread
        sent while it ran (list of dicts, ``busy`` true): proof that the thread runs."""
        before = len(self.messages("sample"))
        self.kernel.run(f"__import__('time').sleep({seconds})")
        return [m for m in self.messages("sample")[before:] if m["busy"]]

    def request_inventory(self, timeout=60.0):
        """Send an ``inventory`` request and return the answer (dict)."""
        before = len(self.messages("inventory"))
        self.send({"protocol": PROTOCOL, "type": "inventory"})
        return self.wait_for("inventory", before + 1, timeout)[before]


def default_kernel_name():
    """The kernelspec a ``Kernel()`` starts when none is named: ``GPU_HYGIENE_KERNEL`` (``make
    compat`` sets it to one of its ``gpu-hygiene-compat-<name>`` kernels, whose folder it puts on
    ``JUPYTER_PATH``), else ``python3`` (this process's own environment)."""
    return os.environ.get("GPU_HYGIENE_KERNEL") or "python3"


@functools.cache
def _kernel_python(kernel_name):
    """The interpreter of kernelspec ``kernel_name`` (its ``argv[0]``), or None for ``python3``
    (jupyter_client's native kernel: this process's interpreter)."""
    if kernel_name == "python3":
        return None
    from jupyter_client.kernelspec import KernelSpecManager

    return KernelSpecManager().get_kernel_spec(kernel_name).argv[0]


@functools.cache
def _kernel_missing(kernel_name, names):
    python = _kernel_python(kernel_name)
    if python is None:
        return tuple(n for n in names if importlib.util.find_spec(n) is None)
    probe = (
        "import importlib.util, json, sys\n"
        "print(json.dumps([n for n in sys.argv[1:] if importlib.util.find_spec(n) is None]))"
    )
    done = subprocess.run(
        [python, "-c", probe, *names], capture_output=True, text=True, check=True, timeout=60
    )
    return tuple(json.loads(done.stdout))


def kernel_missing(*names, kernel_name=None):
    """The modules of ``names`` that the kernel's environment cannot import (tuple of str, in
    the order given), looked up (``importlib.util.find_spec``), not imported, with the
    kernelspec's own interpreter (``kernel_name``, default ``default_kernel_name()``; for
    ``python3``, in this process, whose environment that kernel gets). Cached per kernel."""
    return _kernel_missing(kernel_name or default_kernel_name(), tuple(names))


@functools.cache
def _kernel_versions(kernel_name, names):
    python = _kernel_python(kernel_name)
    probe = (
        "import importlib.metadata as md, json, sys\n"
        "out = {}\n"
        "for n in sys.argv[1:]:\n"
        "    try: out[n] = md.version(n)\n"
        "    except md.PackageNotFoundError: pass\n"
        "print(json.dumps(out))"
    )
    done = subprocess.run(
        [python or sys.executable, "-c", probe, *names],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout)


def kernel_version(name, kernel_name=None):
    """The version (tuple of ints, the leading numeric parts: ``(8, 0, 239)``) of distribution
    ``name`` installed for the kernel (``kernel_name``, default ``default_kernel_name()``), or
    None where it is not installed. Cached per kernel."""
    text = _kernel_versions(kernel_name or default_kernel_name(), (name,)).get(name)
    if text is None:
        return None
    parts = []
    for part in text.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def kernel_needs(*names):
    """A skip mark for a test that needs ``names`` importable in the kernel: the reason names
    what is missing and the kernel it is missing from (a ``make compat`` kernel may lack
    Ultralytics or transformers)."""
    import pytest  # only the tests use marks; scripts import this module without pytest

    missing = kernel_missing(*names)
    return pytest.mark.skipif(
        bool(missing),
        reason=f"{', '.join(missing)} not importable in kernel {default_kernel_name()}",
    )


class Kernel:
    """A real ipykernel process and a blocking client (``Kernel()`` starts one with
    jupyter_client; ``Kernel.attach(connection_file)`` connects to a running one).
    ``kernel_name``: the kernelspec to start (default ``default_kernel_name()``: the
    ``GPU_HYGIENE_KERNEL`` environment variable, else ``python3``; the replay kernel of
    test/ui/replay_kernel is ``gpu-hygiene-replay``, found where ``JUPYTER_PATH`` names that
    folder)."""

    def __init__(self, env=None, connection_file=None, kernel_name=None):
        self.comm_log = []  # comm_open / comm_msg / comm_close from IOPub, in order
        self.iopub_log = []  # (time.monotonic() when read, msg_type) of every IOPub message
        self.by_parent = {}  # parent msg_id -> [IOPub messages]
        self.idle = set()  # parent msg_ids whose 'idle' status arrived
        if connection_file is not None:
            from jupyter_client.blocking import BlockingKernelClient

            self.km = None  # not ours: never restarted or shut down from here
            self.kc = BlockingKernelClient(connection_file=str(connection_file))
            self.kc.load_connection_file()
            # A client without its kernel's manager judges the kernel by its heartbeat: one ping
            # unanswered for time_to_dead (1 s) reads as "Kernel died before replying to
            # kernel_info", which a kernel still starting on a loaded 2-core machine gave
            # (make test, fresh clone). The kernel is the server's: give it 10 s (set before
            # the channel's thread starts, which reads it for its first ping).
            self.kc.hb_channel.time_to_dead = 10.0
            self.kc.start_channels()
            self.kc.wait_for_ready(timeout=60)
            return
        kernel_env = dict(os.environ)
        kernel_env.update(
            {
                "YOLO_OFFLINE": "1",
                "YOLO_VERBOSE": "False",
                "PYDEVD_DISABLE_FILE_VALIDATION": "1",
                "MPLBACKEND": "Agg",
                "PYTHONWARNINGS": "ignore::DeprecationWarning",
            }
        )
        kernel_env.update(env or {})
        from jupyter_client.manager import KernelManager  # here: test_devices runs without it

        for attempt in range(3):
            self.km = KernelManager(kernel_name=kernel_name or default_kernel_name())
            self.km.start_kernel(env=kernel_env)
            self.kc = self.km.client()
            self.kc.start_channels()
            try:
                self.kc.wait_for_ready(timeout=60)
                return
            except RuntimeError:
                # "Kernel died before replying to kernel_info": with pytest's workers starting
                # kernels side by side, another kernel can bind one of the TCP ports this
                # manager chose before this kernel does (ZMQError: Address already in use,
                # seen with 3 workers): a new manager chooses new ports
                if attempt == 2 or self.km.is_alive():
                    raise
                self.kc.stop_channels()
                self.km.cleanup_resources()

    @classmethod
    def attach(cls, connection_file):
        """A blocking client on the running kernel of ``connection_file`` (e.g. the
        ``kernel-<id>.json`` of a Jupyter server's runtime folder); ``shutdown`` then only closes
        the client's channels: the kernel stays its owner's."""
        return cls(connection_file=connection_file)

    # ---- plumbing

    def pump(self, timeout):
        """Read IOPub for up to ``timeout`` seconds (at least everything already queued)."""
        deadline = time.monotonic() + timeout
        while True:
            left = max(0.0, deadline - time.monotonic())
            try:
                msg = self.kc.get_iopub_msg(timeout=left if left > 0 else 0.01)
            except queue.Empty:
                return
            kind = msg["msg_type"]
            self.iopub_log.append((time.monotonic(), kind))
            if kind in ("comm_open", "comm_msg", "comm_close"):
                self.comm_log.append(msg)
            parent = msg["parent_header"].get("msg_id")
            if kind == "status":
                if msg["content"]["execution_state"] == "idle":
                    self.idle.add(parent)
            elif kind not in ("comm_open", "comm_msg", "comm_close"):
                self.by_parent.setdefault(parent, []).append(msg)
            if time.monotonic() >= deadline and timeout > 0:
                return

    def send_shell(self, msg_type, content):
        msg = self.kc.session.msg(msg_type, content)
        self.kc.shell_channel.send(msg)
        return msg["header"]["msg_id"]

    def execute(self, code, silent=False, store_history=True, user_expressions=None, timeout=120):
        """Run one execute request; returns a ``Result`` once the reply and 'idle' are in."""
        msg_id = self.kc.execute(
            code,
            silent=silent,
            store_history=store_history,
            user_expressions=user_expressions or {},
            allow_stdin=False,
        )
        deadline = time.monotonic() + timeout
        reply = None
        while reply is None or msg_id not in self.idle:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no reply to {code[:80]!r}")
            if reply is None:
                try:
                    candidate = self.kc.get_shell_msg(timeout=0.05)
                except queue.Empty:
                    candidate = None
                if candidate is not None and candidate["parent_header"].get("msg_id") == msg_id:
                    reply = candidate["content"]
            self.pump(0.05)
        return Result(reply, self.by_parent.get(msg_id, []))

    # ---- what the tests use

    def inject(self, config=None, source=None, loader=None):
        """Install the agent like the browser does (silent, no history, the hello user
        expression); ``Result.reply["user_expressions"]`` holds the early hello."""
        result = self.execute(
            install_code(config, source, loader),
            silent=True,
            store_history=False,
            user_expressions=HELLO_EXPRESSION,
        )
        assert result.reply["status"] == "ok", result.reply
        return result

    def run(self, code, timeout=120):
        """A user cell: non-silent, stored in history."""
        return self.execute(code, silent=False, store_history=True, timeout=timeout)

    def evaluate(self, **expressions):
        """Evaluate expressions in a silent request (no history, no display hook) and return
        {name: value}; values must have a Python-literal repr."""
        result = self.execute("", silent=True, store_history=False, user_expressions=expressions)
        return {name: result.user_expression(name) for name in expressions}

    def open_comm(self, interval_ms=1000, wait=True):
        """Open a comm to the agent's target like the browser; waits for hello and inventory."""
        comm_id = uuid.uuid4().hex
        self.send_shell(
            "comm_open",
            {
                "comm_id": comm_id,
                "target_name": TARGET,
                "data": {
                    "protocol": PROTOCOL,
                    "type": "configure",
                    "sampleIntervalMs": interval_ms,
                },
            },
        )
        comm = Comm(self, comm_id)
        if wait:
            comm.wait_for("hello")
            comm.wait_for("inventory")
        return comm

    def shutdown(self):
        try:
            self.kc.stop_channels()
        finally:
            if self.km is not None:
                self.km.shutdown_kernel(now=True)


def notebook_cells(path):
    """Code cells (list of str) of a notebook file."""
    notebook = json.loads(Path(path).read_text(encoding="utf-8"))
    cells = []
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            source = cell["source"]
            cells.append("".join(source) if isinstance(source, list) else source)
    return cells


def model_by_order(inventory):
    """Models of an inventory, oldest first."""
    return sorted(inventory["models"], key=lambda m: m["order"])


def holder_names(model, kind=None):
    return {h["name"] for h in model["holders"] if kind is None or h["kind"] == kind}


# the browser's cell generators (the clean cell, the variable actions, the drop-workers cell)
CELL_SOURCES = (
    "src/analysis/codegen/clean-cell.ts",
    "src/analysis/codegen/tensor-cells.ts",
    "src/analysis/codegen/drop-workers-cell.ts",
    "src/analysis/codegen/drop-trainer-cell.ts",
    "src/analysis/memory/graph-holders.ts",
    "src/analysis/memory/freed.ts",
)
# issue 12's views as the app computes them: the message validation, the model, the join with
# the server's kernels (other-kernels.ts, as the gauge and the panel call it), the gauge's
# tooltip, the panel's "On this GPU" table (React)
VIEW_SOURCES = (
    "src/protocol.ts",
    "src/server-kernels.ts",
    "src/server-kernels-schema.ts",
    "src/model.ts",
    "src/tokens.ts",
    "src/analysis/processes/gpu-process-join.ts",
    "src/analysis/processes/device-processes.ts",
    "src/other-kernels.ts",
    "src/statusbar/state.ts",
    "src/panel/tables/gpu-process-table.tsx",
)
# the node packages those compiled modules load (besides the stub of @jupyterlab/services that
# gpu_views.js installs: server-kernels.ts needs it for its fetch only), copied next to them by
# compile_browser for a machine without node_modules
RUNTIME_PACKAGES = (
    "zod",
    "@lumino/algorithm",
    "@lumino/coreutils",
    "@lumino/signaling",
    "react",
    "react-dom",
)
VIEWS_JS = Path(__file__).resolve().with_name("gpu_views.js")


def _tsc(out_dir, sources, tsc=None):
    out = Path(out_dir)
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run(
        [
            str(tsc or ROOT / "node_modules" / ".bin" / "tsc"),
            *("--outDir", str(out), "--rootDir", "src", "--module", "commonjs"),
            *("--target", "es2018", "--moduleResolution", "node", "--esModuleInterop"),
            *("--skipLibCheck", "--strict", "--jsx", "react"),
            *sources,
        ],
        cwd=ROOT,
        check=True,
    )
    return out


def compile_cleanup(out_dir, tsc=None):
    """Compile the browser's cell generators to CommonJS under ``out_dir`` with the project's
    tsc: the clean cell (``src/analysis/codegen/clean-cell.ts`` and what it imports), the variable
    actions' cells (``tensor-cells.ts``), the drop-workers and drop-trainer cells and the detach
    cell (``analysis/memory/graph-holders.ts``) and a receipt's figures
    (``analysis/memory/freed.ts``); returns the
    path of ``analysis/codegen/clean-cell.js`` (the others lie next to it)."""
    return _tsc(out_dir, CELL_SOURCES, tsc) / "analysis" / "codegen" / "clean-cell.js"


def _runtime_file(path):
    """Whether a file of a node package is needed at run time (no sources, types, maps)."""
    name = path.name
    return not (
        name.endswith((".d.ts", ".d.cts", ".d.mts", ".map", ".md", ".ts", ".tsx"))
        or name.startswith(("LICENSE", "README", "CHANGELOG"))
    )


def copy_runtime_packages(out_dir, modules=None):
    """Copy ``RUNTIME_PACKAGES`` from ``modules`` (default this checkout's node_modules) into
    ``out_dir/node_modules`` without their sources, types and source maps (zod's ``src``,
    react-dom's browser and UMD builds); returns the bytes copied."""
    source = Path(modules or ROOT / "node_modules")
    total = 0
    for package in RUNTIME_PACKAGES:
        top = source / package
        if not (top / "package.json").exists():
            raise FileNotFoundError(f"{top}: package {package} missing (npm ci)")
        for path in sorted(top.rglob("*")):
            rel = path.relative_to(top)
            parts = set(rel.parts[:-1])
            if path.is_dir() or parts & {"src", "umd", "node_modules", "types", "test"}:
                continue
            if not (rel.name == "package.json" or _runtime_file(rel)):
                continue
            if package == "react-dom" and ".browser." in rel.name:
                continue
            target = Path(out_dir) / "node_modules" / package / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            total += target.stat().st_size
    return total


def compile_browser(out_dir, tsc=None):
    """``compile_cleanup`` and issue 12's views (``VIEW_SOURCES``) in one folder that runs on a
    machine without node_modules (the GPU check's ``--cleanup-js``): the node packages the
    compiled modules load are copied next to them. Returns the path of
    ``analysis/codegen/clean-cell.js``;
    ``gpu_views`` takes the folder (three levels up)."""
    out = _tsc(out_dir, CELL_SOURCES + VIEW_SOURCES, tsc)
    copy_runtime_packages(out)
    return out / "analysis" / "codegen" / "clean-cell.js"


def views_folder(cleanup_js):
    """The compiled folder of a ``clean-cell.js`` (``<folder>/analysis/codegen/clean-cell.js``)."""
    return Path(cleanup_js).resolve().parent.parent.parent


def gpu_views(folder, node="node"):
    """``render(payload) -> dict``: issue 12's views of the compiled folder ``folder``
    (``compile_browser``), run through ``node`` by ``gpu_views.js``: the kernel's messages
    validated and applied to a ``GpuKernelModel``, the server's answer validated, the join, the
    gauge's tooltip and the panel's "On this GPU" table as text (see gpu_views.js for the
    payload and the answer)."""
    folder = Path(folder).resolve()
    missing = [
        s
        for s in VIEW_SOURCES
        if not (folder / Path(s).relative_to("src")).with_suffix(".js").exists()
    ]
    if missing:
        raise FileNotFoundError(f"{folder} lacks the compiled {missing} (compile_browser)")

    def render(payload):
        done = subprocess.run(
            [str(node), str(VIEWS_JS), str(folder)],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"gpu_views.js failed: {done.stderr.strip()[-3000:]}")
        return json.loads(done.stdout)

    return render


_GENERATE = (
    "const c = require(process.argv[1]);"
    "const {inventory, options} = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
    "process.stdout.write(c.generateCleanCell(c.planClean(inventory, options)));"
)


# the shape every generated clean cell keeps (src/analysis/codegen/clean-cell.ts: MAX_CELL_LINES,
# PEP 8)
CELL_LINES = 25
CELL_WIDTH = 79


def clean_cell_shape(cell):
    """What is wrong with the shape of a generated clean cell (list of str; empty when none):
    more than ``CELL_LINES`` lines, a line wider than ``CELL_WIDTH`` columns."""
    lines = cell.rstrip("\n").split("\n")
    problems = [f"{len(lines)} lines (at most {CELL_LINES})"] if len(lines) > CELL_LINES else []
    problems += [f"{len(line)} columns: {line!r}" for line in lines if len(line) > CELL_WIDTH]
    return problems


def comment_text(cell):
    """The comment lines of a cell (``# ...``, not the first, the marker) as one text: the
    description wraps its words over lines."""
    lines = cell.split("\n")[1:]
    return " ".join(line[2:] for line in lines if line.startswith("# "))


def clean_cell_generator(module, node="node"):
    """``generate(inventory, **options) -> str``: ``generateCleanCell(planClean(inventory,
    options))`` of the compiled ``clean-cell.js`` at ``module``, run through ``node`` (no Python
    copy of the generator). ``options`` are planClean's (the panel's "free" and "delete…")."""

    module = Path(module).resolve()  # require() takes a relative path for a package name

    def generate(inventory, **options):
        done = subprocess.run(
            [str(node), "-e", _GENERATE, str(module)],
            input=json.dumps({"inventory": inventory, "options": options}),
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"clean-cell generator failed: {done.stderr.strip()[-2000:]}")
        problems = clean_cell_shape(done.stdout)
        if problems:
            raise AssertionError("generated clean cell: " + "; ".join(problems))
        return done.stdout

    return generate
