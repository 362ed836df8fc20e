"""Fixtures for the agent tests; the kernel driver itself is ``kernel_driver.py`` (shared with
scripts/gpu_check.py and bench/): ``Kernel`` (a real ipykernel and a blocking client),
``Kernel.inject`` (the agent package sent like the browser sends it: one payload of its modules,
``agent_source``), ``Kernel.open_comm`` (the browser side of the comm), ``Kernel.run`` (a user
cell), and ``load_agent`` (the package loaded in this process, for the tests without a
kernel)."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from kernel_driver import (  # noqa: F401 -- re-exported for the test modules
    AGENT_DIR,
    AGENT_PATH,
    AGENT_VERSION,
    CASES_DIR,
    LOADER_PATH,
    MODULE,
    MODULES,
    PROTOCOL,
    ROOT,
    TARGET,
    THREAD,
    Comm,
    Kernel,
    Result,
    agent_json,
    agent_modules,
    agent_source,
    clean_cell_generator,
    compile_cleanup,
    decode_payload,
    default_kernel_name,
    encode_payload,
    holder_names,
    install_code,
    kernel_missing,
    kernel_version,
    load_agent,
    loader_source,
    model_by_order,
    notebook_cells,
)


def ultralytics_before(version, reason):
    """An xfail mark (not strict) for a test that meets a known limit of Ultralytics older than
    ``version`` (a tuple: ``(8, 3)``) where the kernel has such an Ultralytics; ``reason``
    says what the library does there."""
    found = kernel_version("ultralytics")
    return pytest.mark.xfail(
        found is not None and found < version,
        reason=f"Ultralytics < {'.'.join(map(str, version))}: {reason}",
        strict=False,
    )


def ultralytics_flops_copy():
    """An xfail mark (not strict) for a test that counts the models of a kernel where
    Ultralytics is older than 8.1: there ``YOLO(...)`` counts its FLOPs on a deepcopy of the
    model (``get_flops``, thop) that stays in a reference cycle until the next garbage
    collection. The agent reports it truthfully (a model nothing reaches, ``unreachable from
    the namespace``: the browser's "waiting for garbage collection"), so a test that expects
    exactly the user's models sees one more. With that copy collected these tests pass on
    Ultralytics 8.0 (``make compat``, docs/compat.md)."""
    version = kernel_version("ultralytics")
    return pytest.mark.xfail(
        version is not None and version < (8, 1),
        reason="Ultralytics < 8.1 leaves a copy of each new YOLO model waiting for gc "
        "(get_flops): one more, unreachable model in the inventory",
        strict=False,
    )


# libraries a kernel may lack (a ``make compat`` kernel: torch 2.13.0+cpu has no torchvision
# that imports beside it, so no Ultralytics either)
KERNEL_OPTIONAL = ("ultralytics", "torchvision", "transformers", "accelerate", "lightning")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test whose kernel cell failed on ``No module named '<m>'`` for a library of
    ``KERNEL_OPTIONAL`` that the kernel's environment lacks (``kernel_missing``) is reported as
    skipped with that reason, not as failed: the test needs a library this kernel has not got.
    Any other failure, or that error where the library is installed, stays a failure."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed or call.excinfo is None:
        return
    text = str(report.longrepr)
    for name in KERNEL_OPTIONAL:
        if f"No module named '{name}'" in text and kernel_missing(name):
            report.outcome = "skipped"
            report.longrepr = (
                str(item.path),
                item.location[1] or 0,
                f"Skipped: {name} not importable in kernel {default_kernel_name()}",
            )
            return


@pytest.fixture
def new_kernel():
    """Factory of fresh kernels, all shut down at the end of the test."""
    kernels = []

    def factory(**kwargs):
        kernel = Kernel(**kwargs)
        kernels.append(kernel)
        return kernel

    yield factory
    for kernel in kernels:
        kernel.shutdown()


@pytest.fixture(scope="module")
def module_kernel():
    """One kernel shared by the tests of a module (they must not depend on each other's
    execution counts)."""
    kernel = Kernel()
    yield kernel
    kernel.shutdown()


def read_cells(case_id):
    """Code cells (list of str) of a case notebook."""
    path = CASES_DIR / f"{case_id}.ipynb"
    if not path.exists():
        pytest.skip(f"case notebook {path} not available")
    return notebook_cells(path)


@pytest.fixture(scope="session")
def generate_clean_cell():
    """The browser's clean-cell generator (``src/analysis/codegen/clean-cell.ts``), run through
    node.

    Returns ``generate(inventory) -> str``: ``generateCleanCell(planClean(inventory))`` for an
    inventory message as the agent sent it, so these tests execute exactly the code the
    extension inserts (no Python copy of the generator).
    """
    return clean_cell_generator(compile_cleanup(checks.worker_dir("pytest-ts")))


def compiled_browser(request):
    """``(node, folder)``: node and the folder of the browser's compiled modules (CommonJS):
    ``--cleanup-js``'s folder (a machine without the project's tsc, such as the GPU machine) or
    compiled here; node is ``--node`` or the one on PATH. Skips without node, or without tsc and
    ``--cleanup-js``."""
    node = request.config.getoption("node") or shutil.which("node")
    if not node:
        pytest.skip("node is needed for the browser's cell generators (--node)")
    given = request.config.getoption("cleanup_js")
    if given:
        return node, Path(given).resolve().parent
    if (ROOT / "node_modules" / ".bin" / "tsc").exists():
        return node, compile_cleanup(checks.worker_dir("pytest-ts-cells")).parent
    pytest.skip("the project's tsc or --cleanup-js is needed for the browser's cells")


def run_node(node, script, *args):
    """stdout of ``node -e script args...``."""
    done = subprocess.run(
        [node, "-e", script, *map(str, args)], capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.fixture(scope="session")
def browser_cells(request):
    """``run(module, function, *args) -> str``: a cell generator of ``src/analysis/<module>.ts``
    (``tensor-cells``, ``drop-workers-cell``...) called through node with JSON arguments, so the
    tests run the code the extension inserts (``compiled_browser``)."""
    node, folder = compiled_browser(request)

    def run(module, function, *args):
        script = (
            "const m = require(process.argv[1]);"
            f"process.stdout.write(m.{function}(...JSON.parse(process.argv[2])));"
        )
        return run_node(node, script, folder / f"{module}.js", json.dumps(args))

    return run


@pytest.fixture(scope="session")
def browser_receipt(request):
    """``receipt(before, after, device) -> int | None``: the bytes a fix's toast says it freed,
    from the inventory the fix acted on (``before``) and the one its own cell ended with
    (``after``), counted on ``device`` ("cpu", "cuda:0"), by the browser's own
    ``measuredFreed(heldBy(...))`` (``src/analysis/memory/freed.ts``) through node; None where
    the receipt would say no figure (a truncated inventory)."""
    node, folder = compiled_browser(request)
    script = (
        "const m = require(process.argv[1]);"
        "const [before, after, device] = JSON.parse(process.argv[2]);"
        "const on = d => d === device;"
        "process.stdout.write(JSON.stringify("
        "m.measuredFreed(m.heldBy(before, on), m.heldBy(after, on))));"
    )

    def receipt(before, after, device):
        module = folder.parent / "memory" / "freed.js"
        return json.loads(run_node(node, script, module, json.dumps([before, after, device])))

    return receipt


# --------------------------------------------------------------------------------------------
# the acceptance cases on both devices (test_cases.py) and the GPU truth (test_gpu_truth.py):
# checks.py has the session, the ground truth and the rows; the GPU check's report plugin is
# gpu_report.py (loaded by scripts/gpu_check.py with -p gpu_report)

import checks  # noqa: E402 -- after the re-exports above

DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]


def pytest_addoption(parser):
    group = parser.getgroup("gpu-hygiene", "acceptance cases and GPU truth (test/agent/checks.py)")
    group.addoption("--node", help="node binary for the browser's clean-cell generator")
    group.addoption("--cleanup-js", help="compiled src/analysis/codegen/clean-cell.js (CommonJS)")
    group.addoption("--clean-cells", help="folder of clean cells <key>.py generated elsewhere")
    group.addoption("--dump-inventories", help="save the inventories given to the generator")
    group.addoption("--train-seconds", type=int, default=40, help="GPU training cell length")
    group.addoption("--cost-cells", type=int, default=50, help="cells timed per kind (GPU cost)")
    group.addoption("--retry-hung", action="store_true", help="once more after a kernel hang")


def pytest_runtest_setup(item):
    """A ``gpu`` test skips, with the reason, where NVML sees no NVIDIA GPU (this process never
    imports torch to find out)."""
    if item.get_closest_marker("gpu") is not None:
        reason = checks.no_gpu_reason()
        if reason:
            pytest.skip(reason)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Runs a test that records rows or opens sessions: it fails at its end when a row failed
    (after every row was measured). With ``--retry-hung`` (the GPU check), a test cut short by
    a kernel that stopped answering runs once more in fresh kernels, its first rows dropped,
    unless the run's time budget is spent; the hang keeps its own row in the report."""
    args = pyfuncitem.funcargs
    rows, sessions = args.get("check"), args.get("session")
    if not isinstance(rows, checks.Rows) and not isinstance(sessions, checks.Sessions):
        return None  # pytest's own call
    call = {name: args[name] for name in pyfuncitem._fixtureinfo.argnames}
    try:
        pyfuncitem.obj(**call)
    except Exception:
        recorder = getattr(pyfuncitem.config, "_gpu_recorder", None)
        if not (
            pyfuncitem.config.getoption("retry_hung")
            and isinstance(sessions, checks.Sessions)
            and sessions.hung()
            and not (recorder is not None and recorder.over_budget())
        ):
            raise
        checks.log.exception("(%s: a kernel hung; running the test again)", pyfuncitem.nodeid)
        sessions.close_all()
        if isinstance(rows, checks.Rows):
            rows.rows.clear()
            rows.extras.clear()
        pyfuncitem.obj(**call)
    if isinstance(rows, checks.Rows) and rows.failed():
        lines = [f"{r.check}: expected {r.expected}; measured {r.measured}" for r in rows.failed()]
        pytest.fail("failed rows:\n" + "\n".join(lines), pytrace=False)
    return True


@pytest.fixture
def check(request):
    """The rows (check | expected | measured | result) this test records (``checks.Rows``)."""
    rows = checks.Rows(request.node.nodeid)
    request.node.gpu_rows = rows
    return rows


@pytest.fixture
def session(request):
    """``session(case)``: a kernel running case notebook ``case`` with the agent injected, on
    the test's ``device`` parameter ("cuda" for a test marked ``gpu`` without one)."""
    callspec = getattr(request.node, "callspec", None)
    device = callspec.params.get("device") if callspec else None
    if device is None:
        device = "cuda" if request.node.get_closest_marker("gpu") else "cpu"
    sessions = checks.Sessions(device, request.node.name)
    request.node.gpu_sessions = sessions
    yield sessions
    sessions.close_all()


@pytest.fixture(scope="session")
def clean_cells(request):
    """``clean_cells(inventory, key)``: the browser's clean cell for an inventory
    (``checks.CleanCells``: ``--node``, ``--cleanup-js``, ``--clean-cells``,
    ``--dump-inventories``)."""
    option = request.config.getoption
    return checks.CleanCells(
        node=option("node"),
        cleanup_js=option("cleanup_js"),
        clean_cells=option("clean_cells"),
        dump=option("dump_inventories"),
    )
