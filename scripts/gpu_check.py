#!/usr/bin/env python3
"""GPU truth check of the kernel agent on real CUDA (issue 6), comm protocol 2: the harness.

Every check is a pytest test, written once (issue 11): the acceptance cases C01, C03, C05, C08,
C10, C11 in ``test/agent/test_cases.py`` run on both devices, their ``[cuda]`` variants (marked
``gpu``) on cuda:0 with the agent's figures compared with NVML, ``nvidia-smi`` and torch read at
the same moment; the checks without a CPU counterpart (1 no CUDA context from the agent, 4 live
samples during ``model.train``, 6 cost, 8 ``CUDA_VISIBLE_DEVICES``) in
``test/agent/test_gpu_truth.py``; issue 12 ("who else is on my GPU": a real Jupyter server with
the server extension, two notebook kernels and a plain process on cuda:0, the browser's join,
tooltip and panel against ``nvidia-smi``, the process list's cost) in
``test/agent/test_on_this_gpu.py``. Each test records its rows (check | expected | measured |
result); this script only

- installs what the kernels lack from ``--wheels DIR`` (pip ``--no-index --no-deps`` into a
  private target directory put on ``PYTHONPATH`` for pytest, the kernels and the Jupyter
  server; every wheel of the folder once anything is missing, so jupyter_server and its needs
  come with the others);
- runs pytest once on those tests, in the order below (``--only`` picks groups), with the
  report plugin ``test/agent/gpu_report.py`` (rows to a JSON lines file, the full log to
  ``--log``, ``--budget-s``, one more attempt in fresh kernels after a hang);
- writes the environment table and the rows to ``--report`` (a hand-written part after a
  ``---`` line followed by ``## Context`` in an existing report is kept).

The clean cells are made by the browser's own TypeScript generator
(``src/analysis/codegen/clean-cell.ts``),
compiled to CommonJS and run through node (``--node``, ``--cleanup-js``; compiled with the
project's tsc when neither is given), or read from ``--clean-cells DIR`` (files ``<key>.py``
generated elsewhere from the inventories that ``--dump-inventories DIR`` saved on an earlier run:
``--generate-clean-cells INV OUT`` does that where node is). Issue 12's views (the join, the
tooltip, the panel's table) run from the same compiled folder (three levels above
``analysis/codegen/clean-cell.js``), which ``kernel_driver.compile_browser`` makes with the
node packages they load, for a machine without node_modules: ``scripts/gpu_check.py --compile-js
DIR`` where tsc is.

``--device cpu`` runs the same groups' ``[cpu]`` variants instead (CUDA hidden from the kernels),
to try the plumbing on a machine without GPU; the device-only tests then skip. Neither this script
nor its pytest process imports torch, so they create no CUDA context of their own.
"""

import argparse
import datetime
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "test" / "agent"
sys.path.insert(0, str(TESTS))

import checks  # noqa: E402 -- needs the path above
import kernel_driver as kd  # noqa: E402

NEEDED = ("ipykernel", "jupyter_client", "IPython", "ultralytics", "pynvml", "pytest")
NEEDED += ("pytest_timeout",)
NEEDED_BY = {"processes": ("jupyter_server",)}  # more for a group: its server
FAILED_ROWS = re.compile(r"(Failed: )?failed rows:")  # a test that failed by its rows only
CONTEXT_MARK = "\n---\n\n## Context"  # the hand-written tail of the report, kept on rewrite
CASES = "test/agent/test_cases.py::"
TRUTH = "test/agent/test_gpu_truth.py::"
LLM = "test/agent/test_llm_holders.py::"
# name -> (title, tests); "{d}" is the device parameter. In the order they run (the longest and
# the newest first, under --budget-s).
CHECKS = {
    "provenance": (
        "24 live memory by cell and line",
        ["test/agent/test_provenance.py::test_live_memory_by_cell_and_line[{d}]"],
    ),
    "graphs": (
        "28.2 autograd graphs wherever they are held",
        [
            "test/agent/test_graphs_anywhere.py::"
            "test_a_displayed_mean_keeps_the_lists_graphs_and_fix_detaches_both[{d}]",
            "test/agent/test_graphs_anywhere.py::"
            "test_graphs_under_an_attribute_or_nested_twice_are_found[{d}]",
        ],
    ),
    "processes": (
        "12 on this GPU",
        ["test/agent/test_on_this_gpu.py::test_two_notebooks_and_a_plain_process_on_one_gpu[{d}]"],
    ),
    "stacking": (
        "2-3 figures, stacking, clean",
        [CASES + "test_c01_with_the_generated_clean_cell[{d}]"],
    ),
    "oom": ("5 OOM", [CASES + "test_c05_generated_clean_cell_right_after_the_failure[{d}]"]),
    "training": ("4 training", [TRUTH + "test_live_samples_during_training"]),
    "C08": ("C08", [CASES + "test_c08_a_list_of_losses_keeps_four_graphs[{d}]"]),
    "C10": ("C10", [CASES + "test_c10_a_deleted_tensor_is_no_holder_and_nothing_is_stale[{d}]"]),
    "C11": ("C11", [CASES + "test_c11_small_tensors_no_models_no_stale_warning[{d}]"]),
    "cost": ("6 cost", [TRUTH + "test_cost_per_cell_and_per_sample"]),
    "devices": (
        "8 CUDA_VISIBLE_DEVICES",
        [TRUTH + "test_cuda_visible_devices_maps_to_the_nvml_device"],
    ),
    "no-context": ("1 no context", [TRUTH + "test_no_cuda_context_from_the_agent"]),
    "utilisation": (
        "29.4 utilisation beside memory",
        [TRUTH + "test_utilisation_while_a_cell_multiplies_matrices"],
    ),
    "C01": (
        "C01",
        [
            CASES + "test_c01_rerun_stacks_a_second_instance_pinned_by_out[{d}]",
            CASES + "test_c01_control_a_model_cell_ending_with_a_semicolon[{d}]",
        ],
    ),
    "C05": (
        "C05",
        [
            CASES + "test_c05_traceback_keeps_the_activation[{d}]",
            CASES + "test_c05_the_traceback_is_a_root_with_the_activation_bytes[{d}]",
        ],
    ),
    "C03": ("C03", [CASES + "test_c03_underscore_names_keep_the_model_after_model_none[{d}]"]),
    "llm-holders": (
        "23 holders of plain PyTorch and transformers notebooks",
        [
            LLM + "test_an_optimizer_keeps_the_weights_of_a_deleted_model[{d}]",
            LLM + "test_an_optimizer_of_named_parameters_is_no_deleted_model[{d}]",
            LLM + "test_a_caught_error_kept_in_a_variable_keeps_its_frames[{d}]",
            LLM + "test_aliases_compiled_and_tied_models_raise_nothing[{d}]",
            LLM + "test_a_pipeline_keeps_the_model_it_was_built_on[{d}]",
            LLM + "test_a_forward_hook_appends_outputs_with_their_graphs[{d}]",
        ],
    ),
}
NOTES = (
    "Agent figures are compared in bytes and must be equal to torch's and NVML's unless the "
    "expected column gives a tolerance; case figures marked 'about' in test/cases/README.md "
    "get the tolerance written in the row.",
    "Kernels run with YOLO_OFFLINE=true and a private YOLO_CONFIG_DIR that already holds "
    "Arial.ttf (a copy of matplotlib's DejaVuSans): Ultralytics' dataset check would "
    "otherwise probe the network for that font even offline. Training uses amp=False "
    "(no AMP check model) and plots=False.",
)


# --------------------------------------------------------------------------------------------
# set-up


def ensure_packages(wheels, needed=NEEDED):
    """Install what the kernels and pytest need (``needed``, module names) from a wheel folder
    when it is not importable: every wheel of the folder; returns the target directory used (or
    None)."""
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    if not wheels:
        sys.exit(f"missing Python packages {missing}: pass --wheels DIR (a folder of wheels)")
    files = sorted(str(p) for p in Path(wheels).glob("*.whl"))
    if not files:
        sys.exit(f"missing Python packages {missing}, and no *.whl in {wheels}")
    target = Path(tempfile.gettempdir()) / "gpu-check-site"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps"),
            *("--no-compile", "--no-cache-dir", "--upgrade", "--target", str(target), *files),
        ],
        check=True,
    )
    sys.path.insert(0, str(target))
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(target) + (os.pathsep + old if old else "")
    importlib.invalidate_caches()
    still = [m for m in needed if importlib.util.find_spec(m) is None]
    if still:
        sys.exit(f"still missing after installing {wheels}: {still}")
    return target


def agent_blob():
    """The sha1 of the agent text the browser sends (the payload's JSON of every module of the
    package, in load order, before compression), so a report says which agent text ran even from
    an uncommitted tree."""
    return "payload sha1 " + hashlib.sha1(kd.agent_json().encode()).hexdigest()[:12]


def cleanup_module(args):
    """``--cleanup-js``, or the browser's modules compiled here with the project's tsc
    (``compile_browser``: the cell generators and issue 12's views); exits with what to pass
    when neither works (node missing, no node_modules on this machine)."""
    node = args.node or "node"
    if not shutil.which(node):
        sys.exit(f"node not found ({node}): pass --node PATH, or --clean-cells DIR")
    if args.cleanup_js:
        return args.cleanup_js
    try:
        return str(kd.compile_browser(ROOT / ".make" / "gpu-check" / "js"))
    except (OSError, subprocess.CalledProcessError) as exc:
        sys.exit(
            f"cannot compile src/analysis/codegen/clean-cell.ts here ({exc}): pass --cleanup-js "
            "(a compiled clean-cell.js) and --node, or --clean-cells DIR"
        )


def version(dist):
    try:
        return importlib.metadata.version(dist)
    except Exception:
        return "not installed"


def kernel_versions(device):
    """Versions as the kernel sees them (torch's CUDA, IPython...)."""
    env = dict(checks.kernel_environment())
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    k = kd.Kernel(env=env)
    try:
        return k.evaluate(
            torch="__import__('torch').__version__",
            cuda="__import__('torch').version.cuda",
            ipython="__import__('IPython').__version__",
            python="__import__('sys').version.split()[0]",
        )
    finally:
        k.shutdown()


def generate_only(inv_dir, out_dir, args):
    clean = checks.CleanCells(
        node=args.node, cleanup_js=args.cleanup_js, compile_dir=ROOT / ".make" / "gpu-check" / "js"
    )
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    for path in sorted(Path(inv_dir).glob("*.json")):
        inventory = json.loads(path.read_text(encoding="utf-8"))
        (Path(out_dir) / f"{path.stem}.py").write_text(clean.generate(inventory), encoding="utf-8")
        print(f"{path.stem}.py")


# --------------------------------------------------------------------------------------------
# pytest


def pytest_env(args):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    env.setdefault("YOLO_OFFLINE", "true")
    if args.devices_note:
        env["GPU_CHECK_DEVICES_NOTE"] = args.devices_note
    if args.device == "cpu":
        env["GPU_HYGIENE_GPU"] = "0"  # the device-only tests skip, whatever this machine has
    return env


def other_gpu_tests(args, listed):
    """Tests marked ``gpu`` in the modules below that no group names (run after the groups), the
    fault kinds of issue 17 on cuda:0: "Drop the finished trainer" (``test_trained_model.py``),
    output-cache cells, hidden copies and CUDA tensor containers (``test_output_copies.py``),
    the allocator split and DataLoader workers (``test_workers_allocator.py``)."""
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"),
            *("-m", "gpu", "test/agent/test_cases.py", "test/agent/test_gpu_truth.py"),
            "test/agent/test_trained_model.py",
            "test/agent/test_output_copies.py",
            "test/agent/test_workers_allocator.py",
        ],
        cwd=ROOT,
        env=pytest_env(args),
        capture_output=True,
        text=True,
    )
    found = [line.strip() for line in done.stdout.splitlines() if "::" in line]
    return [test for test in found if test not in listed]


def run_pytest(args, tests, rows_path, log_path, budget_left):
    """pytest on ``tests`` in this order with the report plugin; its output is echoed and
    appended to the log. ``budget_left``: what is left of ``--budget-s`` (s). Returns pytest's
    exit status."""
    option = [
        *(["--budget-s", str(budget_left)] if budget_left is not None else []),
        *(["--node", args.node] if args.node else []),
        *(["--cleanup-js", args.cleanup_js] if args.cleanup_js else []),
        *(["--clean-cells", args.clean_cells] if args.clean_cells else []),
        *(["--dump-inventories", args.dump_inventories] if args.dump_inventories else []),
    ]
    command = [
        *(sys.executable, "-m", "pytest", "-p", "gpu_report", "-p", "no:cacheprovider"),
        *("-o", "addopts=", "-rfEs", "--retry-hung"),
        *("--rows", str(rows_path), "--gpu-log", str(log_path)),
        *("--train-seconds", str(args.train_seconds), "--cost-cells", str(args.cost_cells)),
        *option,
        *(args.pytest_arg or []),
        *tests,
    ]
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"\n$ {' '.join(command)}\n")
    output = []
    # SIGTERM (a session limit, a `timeout`) ends pytest and still writes the report of what ran
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with subprocess.Popen(
        command,
        cwd=ROOT,
        env=pytest_env(args),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    ) as proc:
        try:
            for line in proc.stdout:
                print(line, end="", flush=True)
                output.append(line)
        except KeyboardInterrupt:
            output.append("\n(gpu-check interrupted: pytest stopped; the report has what ran)\n")
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            print(output[-1], flush=True)
    with open(log_path, "a", encoding="utf-8") as log:
        log.write("\n===== pytest output\n" + "".join(output))
    return proc.returncode


def read_records(path):
    tests, session = {}, {"rows": [], "clean": "not needed"}
    if not path.exists():
        return tests, session
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("session"):
            session = record
        else:
            tests[record["nodeid"]] = record
    return tests, session


def rows_of(groups, tests):
    """The report's rows, group by group: each test's own rows; a test that did not run gets a
    row saying why (n/a), one that stopped on an error (not a failed row) a failed 'run' row,
    one that passed without rows of its own (an assertion-only test) a row saying so."""
    rows = []
    for title, ids in groups:
        for test in ids:
            record = tests.get(test)
            if record is None:
                rows.append((title, "runs", f"not run: pytest reported nothing for {test}", False))
                continue
            rows.extend(tuple(r) for r in record["rows"])
            why = record["why"].removeprefix("Skipped: ")
            if record["outcome"] == "skipped":
                why = why if why.startswith("not run") else f"not run: {why}"
                rows.append((title, "runs", why, None))
            elif record["outcome"] == "failed" and not FAILED_ROWS.match(why):
                rows.append((f"{title}: run", "completes", why[:300], False))
            elif not record["rows"] and record["outcome"] == "passed":
                name = test.split("::")[-1]
                rows.append((f"{title}: {name}", "passes (assertions only)", "passed", True))
    return rows


# --------------------------------------------------------------------------------------------
# report


def table(rows):
    lines = ["| check | expected | measured | result |", "| --- | --- | --- | --- |"]
    for check, expected, measured, ok in rows:
        mark = {True: "pass", False: "**FAIL**", None: "n/a"}[ok]
        cells = [str(c).replace("|", "\\|").replace("\n", " ") for c in (check, expected, measured)]
        lines.append(f"| {cells[0]} | {cells[1]} | {cells[2]} | {mark} |")
    return "\n".join(lines)


def curve_table(points):
    step = max(1, len(points) // 16)
    shown = points[::step] + ([points[-1]] if (len(points) - 1) % step else [])
    return [
        "Allocated during `model.train(...)` (agent samples, s since the cell started):",
        "",
        "| t (s) | " + " | ".join(f"{t:.1f}" for t, _a in shown) + " |",
        "| --- | " + " | ".join("---" for _ in shown) + " |",
        "| MiB | "
        + " | ".join("-" if a is None else f"{a / checks.MiB:.0f}" for _t, a in shown)
        + " |",
        "",
    ]


def write_report(path, env, rows, notes, curve, seconds, sections=()):
    """The report: the environment, the rows, the training curve, the tests' own sections
    (markdown lines, e.g. issue 12's tooltip and panel text), the notes; a hand-written tail
    of an existing report is kept."""
    failed = sum(1 for row in rows if row[3] is False)
    passed = sum(1 for row in rows if row[3] is True)
    na = sum(1 for row in rows if row[3] is None)
    summary = f"{passed} pass, {failed} fail, {na} n/a"
    lines = [
        "# GPU check: the agent on real CUDA",
        "",
        "Written by `scripts/gpu_check.py` (`make gpu-check`) from the rows of pytest tests "
        "marked `gpu` (`test/agent/test_cases.py` `[cuda]`, the same tests that run on the CPU as "
        "`[cpu]`, and `test/agent/test_gpu_truth.py`): real IPython kernels started through "
        "jupyter_client, the agent injected exactly as the extension sends it, the browser's "
        "side of the comm played by the tests; every agent figure compared with NVML, "
        "`nvidia-smi` and torch read at the same moment; issue 12 "
        "(`test/agent/test_on_this_gpu.py`) in a real Jupyter server with the server extension, "
        "the browser's join, tooltip and panel run as compiled TypeScript. Cases: "
        "`test/cases/README.md`, "
        f"'extension should'. 'n/a': the figure is not carried by comm protocol {kd.PROTOCOL}, "
        "the check needs hardware this machine lacks, or the run's time budget (`--budget-s`) "
        "was spent first. Full log: `--log` (default .make/gpu-check.log).",
        "",
        "| | |",
        "| --- | --- |",
        *[f"| {k} | {v} |" for k, v in env.items()],
        f"| result | {summary}, {seconds:.0f} s |",
        "",
        table(rows),
        "",
    ]
    if curve:
        lines += curve_table(curve)
    for section in sections:
        lines += [*section, ""]
    if notes:
        lines += ["Notes:", "", *[f"- {note}" for note in notes]]
    text = "\n".join(lines).rstrip() + "\n" + hand_written(path)
    path.write_text(text, encoding="utf-8")
    return summary


def hand_written(path):
    """The hand-written tail of an existing report (from a '---' line followed by '## Context'),
    kept when the script rewrites the report; '' when there is none."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return ""
    at = text.find(CONTEXT_MARK)
    return text[at:] if at >= 0 else ""


# --------------------------------------------------------------------------------------------
# main


def parse_args():
    """The command line (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", help="default docs/gpu-check.md (.make/gpu-check-cpu.md "
                        "with --device cpu)")  # fmt: skip
    parser.add_argument("--log", help="full log (cells, outputs); default .make/gpu-check.log")
    parser.add_argument("--wheels", help="wheel folder for missing packages (installed offline)")
    parser.add_argument("--node", help="node binary for the clean-cell generator")
    parser.add_argument(
        "--cleanup-js", help="compiled src/analysis/codegen/clean-cell.js (CommonJS)"
    )
    parser.add_argument("--clean-cells", help="folder of pre-generated clean cells <key>.py")
    parser.add_argument("--dump-inventories", help="save the inventories given to the generator")
    parser.add_argument(
        "--generate-clean-cells",
        nargs=2,
        metavar=("INVENTORIES", "OUT"),
        help="only generate clean cells from saved inventories (where node is) and exit",
    )
    parser.add_argument(
        "--compile-js",
        metavar="DIR",
        help="only compile the browser's modules into DIR (with the node packages they load: "
        "a folder for --cleanup-js DIR/analysis/codegen/clean-cell.js on a machine without "
        "node_modules) "
        "and exit",
    )
    parser.add_argument("--only", help="comma-separated subset of: " + ", ".join(CHECKS))
    parser.add_argument("--note", action="append", help="a line for the report's notes")
    parser.add_argument("--train-seconds", type=int, default=40)
    parser.add_argument("--budget-s", type=float, help="start no test after this long")
    parser.add_argument("--cost-cells", type=int, default=50)
    parser.add_argument(
        "--devices-note", help="why row 8 could not run here (e.g. the 2-GPU kind is not lent)"
    )
    parser.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default="cuda",
        help="cpu: the groups' [cpu] variants (a dry run of the plumbing without GPU)",
    )
    parser.add_argument("--pytest-arg", action="append", help="one more argument for pytest")
    return parser.parse_args()


def compile_only(out_dir):
    """``--compile-js``: compile the browser's modules into ``out_dir`` and say where."""
    cleanup = kd.compile_browser(Path(out_dir))
    size = sum(f.stat().st_size for f in Path(out_dir).rglob("*") if f.is_file())
    print(f"{cleanup} ({size / 2**20:.1f} MiB in {out_dir}, node packages included)")


def selected_checks(args):
    """The names of the checks to run (``--only``, else all); exits on an unknown one."""
    names = [n.strip() for n in args.only.split(",")] if args.only else list(CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        sys.exit(f"unknown checks {unknown}; known: {', '.join(CHECKS)}")
    return names


def output_paths(args, no_gpu):
    """(report, log) paths, their folders made. The device report is docs/gpu-check.md; a run
    that cannot measure does not overwrite it unless --report says so."""
    default_report = "docs/gpu-check.md"
    if args.device == "cpu":
        default_report = ".make/gpu-check-cpu.md"
    elif no_gpu:
        default_report = ".make/gpu-check-nogpu.md"
    report_path = Path(args.report or ROOT / default_report)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    log_path = Path(args.log) if args.log else ROOT / ".make" / "gpu-check.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    return report_path, log_path


def environment(args, names, target, nvml, no_gpu):
    """The report's environment table (dict, in order): the machine, the GPU, the versions
    the kernels run, the agent, the tests; ``clean cells`` is filled in after the run."""
    versions = kernel_versions(args.device)
    return {
        "date (UTC)": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "GPU": ", ".join(f"{i}: {nvml.name(i)}" for i in range(nvml.count)) or f"none ({no_gpu})",
        "GPU memory": checks.mib(nvml.memory(0)[2], 0),
        "driver": nvml.driver(),
        "CUDA (driver)": nvml.cuda_driver(),
        "torch": f"{versions['torch']} (CUDA {versions['cuda']})",
        "Python": versions["python"],
        "ipykernel": version("ipykernel"),
        "IPython": versions["ipython"],
        "jupyter_client": version("jupyter_client"),
        "jupyter_server": version("jupyter_server"),
        "ultralytics": version("ultralytics"),
        "nvidia-ml-py": version("nvidia-ml-py"),
        "polars": version("polars"),
        "agent": f"{kd.AGENT_VERSION} (comm protocol {kd.PROTOCOL}), {agent_blob()}",
        "machine": f"{platform.node()} {platform.machine()} {platform.release()}",
        "packages from wheels": str(target) if target else "no (all importable)",
        "clean cells": "",
        "tests": f"pytest {version('pytest')}, device {args.device}: "
        + ", ".join(sorted({t.split("::")[0] for n in names for t in CHECKS[n][1]})),
    }


def check_groups(args, names):
    """(groups, tests): the report's groups [(title, test ids)] of the checks ``names`` on
    ``args.device``, plus, for a full CUDA run, the other gpu-marked tests; and all the ids."""
    groups = [(CHECKS[n][0], [t.format(d=args.device) for t in CHECKS[n][1]]) for n in names]
    tests = [t for _title, ids in groups for t in ids]
    if args.device == "cuda" and not args.only:
        others = other_gpu_tests(args, tests)
        if others:
            groups.append(("other gpu tests", others))
            tests += others
    return groups, tests


def report_notes(records, args):
    """The report's notes: the fixed ones, then each test's (once), then ``--note``."""
    notes = list(NOTES)
    for record in records.values():
        notes += [note for note in record["notes"] if note not in notes]
    return notes + (args.note or [])


def write_results(args, env, groups, status, paths, started):
    """Read the run's records (``paths``: report, log, rows), write the report and print the
    table; ``started``: when the run began (``time.monotonic()``). Returns the rows."""
    report_path, log_path, rows_path = paths
    records, session = read_records(rows_path)
    if status not in (0, 1) or not session["rows"]:
        print(f"gpu-check: pytest ended with status {status}; the log is {log_path}", flush=True)
    rows = rows_of(groups, records) + [tuple(r) for r in session["rows"]]
    if status not in (0, 1):
        rows.append(("pytest", "runs every test", f"exit status {status} (see the log)", False))
    env["clean cells"] = session["clean"]
    curve = next((r["extras"]["training_curve"] for r in records.values()
                  if r["extras"].get("training_curve")), None)  # fmt: skip
    sections = [r["extras"]["report_section"] for r in records.values()
                if r["extras"].get("report_section")]  # fmt: skip
    notes = report_notes(records, args)
    elapsed = time.monotonic() - started
    summary = write_report(report_path, env, rows, notes, curve, elapsed, sections)
    print()
    print(table(rows))
    print(f"\n{summary}; report {report_path}, log {log_path}")
    return rows


def main():
    args = parse_args()
    if args.generate_clean_cells:
        generate_only(*args.generate_clean_cells, args)
        return 0
    if args.compile_js:
        compile_only(args.compile_js)
        return 0

    started = time.monotonic()
    names = selected_checks(args)
    needed = NEEDED + tuple(m for n in names for m in NEEDED_BY.get(n, ()))
    target = ensure_packages(args.wheels, needed)
    nvml = checks.nvml()
    no_gpu = checks.no_gpu_reason() if args.device == "cuda" else None
    report_path, log_path = output_paths(args, no_gpu)
    if no_gpu:
        print(f"gpu-check: {no_gpu}: every test marked gpu skips; report {report_path}", flush=True)
    env = environment(args, names, target, nvml, no_gpu)
    with open(log_path, "w", encoding="utf-8") as log:
        log.writelines(f"{key}: {value}\n" for key, value in env.items())

    if not args.clean_cells and not no_gpu:
        args.cleanup_js = cleanup_module(args)
    groups, tests = check_groups(args, names)
    rows_path = log_path.with_name(log_path.name + ".rows.jsonl")
    spent = time.monotonic() - started
    budget_left = None if args.budget_s is None else max(0.0, args.budget_s - spent)
    status = run_pytest(args, tests, rows_path, log_path, budget_left)
    rows = write_results(args, env, groups, status, (report_path, log_path, rows_path), started)
    if no_gpu:
        print(f"gpu-check: {no_gpu}", file=sys.stderr)
        return 2
    return 1 if any(row[3] is False for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
