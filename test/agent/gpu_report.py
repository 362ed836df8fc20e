"""pytest plugin of the GPU check (``scripts/gpu_check.py`` loads it with ``-p gpu_report``): it
writes what each test measured, so that the script can make docs/gpu-check.md of it. The tests
themselves (test_cases.py ``[cuda]``, test_gpu_truth.py) hold every expectation; this plugin
only records.

- ``--rows FILE``: one JSON line per test: its node id, its rows (check | expected | measured |
  result, ``checks.Rows``), notes and extras (the training curve), its outcome and, when it did
  not pass, why; a last line (``"session": true``) with the rows about every kernel of the run
  (kernels that stopped answering, agent ``error`` messages, network use) and about this process
  (it never imported torch).
- ``--gpu-log FILE``: every cell, its output and every row, as the tests log them.
- ``--budget-s S``: a test that would start after S seconds is skipped ("not run: the run's time
  budget was spent").
- With ``--retry-hung`` (conftest.py's ``pytest_pyfunc_call``) a test cut short by a kernel that
  stopped answering runs once more in fresh kernels unless the budget is spent.
"""

import json
import logging
import sys
import time

import checks
import pytest

BUDGET_SPENT = "not run: the run's time budget was spent"
_REPORTS = {}  # node id -> its setup/call/teardown reports


def pytest_addoption(parser):
    group = parser.getgroup("gpu-report", "the GPU check's report (scripts/gpu_check.py)")
    group.addoption("--rows", help="JSON lines: each test's rows and outcome")
    group.addoption("--gpu-log", help="full log of the cells, outputs and rows")
    group.addoption("--budget-s", type=float, help="start no test after this many seconds")


class Recorder:
    def __init__(self, config):
        self.config = config
        self.started = time.monotonic()
        path = config.getoption("rows")
        self.out = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115
        self.reports = {}
        log_path = config.getoption("gpu_log")
        if log_path:
            handler = logging.FileHandler(log_path, mode="a", encoding="utf-8")
            handler.setFormatter(logging.Formatter("%(message)s"))
            checks.log.addHandler(handler)

    def over_budget(self):
        budget = self.config.getoption("budget_s")
        return budget is not None and time.monotonic() - self.started > budget

    def write(self, record):
        if self.out is not None:
            self.out.write(json.dumps(record, default=str) + "\n")
            self.out.flush()


def pytest_configure(config):
    config._gpu_recorder = Recorder(config)


def _recorder(config):
    return config._gpu_recorder


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if _recorder(item.config).over_budget():
        pytest.skip(BUDGET_SPENT)


def pytest_runtest_logreport(report):
    _REPORTS.setdefault(report.nodeid, []).append(report)


def _why(report):
    if report.skipped:
        longrepr = report.longrepr
        return longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    if isinstance(report.longrepr, str):  # pytest.fail(..., pytrace=False): failed rows
        return report.longrepr.strip()
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message
    return str(report.longrepr).strip().splitlines()[-1] if report.longrepr else ""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    started = time.monotonic()
    checks.log.info("\n######## %s", item.nodeid)
    try:
        yield
    finally:
        reports = _REPORTS.get(item.nodeid, [])
        outcome, why = "passed", ""
        for report in reports:
            if report.failed or (report.skipped and outcome == "passed"):
                outcome, why = ("failed" if report.failed else "skipped"), _why(report)
                if report.failed:
                    break
        rows = getattr(item, "gpu_rows", None)
        record = {
            "nodeid": item.nodeid,
            "outcome": outcome,
            "why": why[:600],
            "seconds": round(time.monotonic() - started, 1),
            "rows": [list(r) for r in rows.rows] if rows else [],
            "notes": rows.notes if rows else [],
            "extras": rows.extras if rows else {},
        }
        _recorder(item.config).write(record)
        checks.log.info("(%s: %s in %.1f s) %s", item.nodeid, outcome, record["seconds"], why)
        terminal = item.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            terminal.write_line("")
            for check, _expected, measured, ok in record["rows"]:
                mark = {True: "pass", False: "FAIL", None: "n/a"}[ok]
                terminal.write_line(f"[{mark}] {check}: {measured}"[:400])


def pytest_sessionfinish(session):
    recorder = getattr(session.config, "_gpu_recorder", None)
    if recorder is None:
        return
    run = checks.RUN
    rows = [
        (
            "kernels that stopped answering (cell timeout)",
            "none",
            f"{len(run.hangs)}"
            + (f": {'; '.join(run.hangs)} (stacks in the log)" if run.hangs else ""),
            not run.hangs,
        )
    ]
    errors = {name: found for name, found in run.agent_errors.items() if found}
    rows.append(
        (
            "agent `error` messages in every kernel",
            "none",
            f"{len(run.agent_errors)} kernels, error messages in {sorted(errors) or 'none'}"
            + (f": {next(iter(errors.values()))[0]}" if errors else ""),
            not errors,
        )
    )
    if run.network:
        used = {name: events for name, events in run.network.items() if events}
        rows.append(
            (
                "network use in every kernel (audit hook)",
                "none: nothing downloaded, not even tried",
                f"{len(run.network)} kernels, network events in {sorted(used) or 'none'}"
                + (f": {next(iter(used.values()))[0]}" if used else ""),
                not used,
            )
        )
    imported = "torch" in sys.modules
    rows.append(
        (
            "the check's own process (pytest)",
            "never imports torch (no CUDA context of its own)",
            f"torch in sys.modules: {imported}",
            not imported,
        )
    )
    recorder.write({"session": True, "rows": [list(r) for r in rows], "clean": run.clean_cells})
