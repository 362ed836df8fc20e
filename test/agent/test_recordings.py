"""Recorded sessions and their replay (issue 15), with real kernels on the CPU:

- ``scripts/record_session.py`` records the CPU smoke scenario (test/recordings/cpu-smoke.py) in
  a real kernel with the real agent: the file's header, the comm in both directions (the
  ``comm_open``'s configure first, ``hello`` the first message of the agent), samples in time
  order, a start and an end for every cell, the marks the cells printed;
- the replay kernel (test/ui/replay_kernel, kernelspec ``gpu-hygiene-replay``) answers the
  browser's agent install without running the agent, answers the ``comm_open`` with a
  ``hello``, and ``%gpu_replay <recording> --speed 20`` sends the recording's "out" messages in
  order, equal but for their ``t`` (all shifted by one offset: replay start - the recording's
  first ``t``), at the recorded pace divided by 20, the cell running until the last one was sent;
- what the replay sent, through the browser's own validation, model and gauge (the compiled
  TypeScript run by node, as test_on_this_gpu.py does): the recorded session's gauge.
"""

import datetime
import json
import re
import shutil
import subprocess
import sys
from typing import NamedTuple

import kernel_driver as kd
import pytest
from kernel_driver import AGENT_VERSION, MODULE, PROTOCOL, ROOT, TARGET, THREAD, Kernel

pytestmark = pytest.mark.timeout(240)

SMOKE = ROOT / "test" / "recordings" / "cpu-smoke.py"
COMMITTED = ROOT / "test" / "recordings" / "cpu-smoke.jsonl"
REPLAY_KERNELS = ROOT / "test" / "ui" / "replay_kernel"
INTERVAL_MS = 250
SPEED = 20
KINDS = {"hello", "sample", "inventory", "cleaned", "oom", "gpuProcesses", "error"}
ENV_KEYS = {"python", "torch", "ultralytics", "agent", "device", "totalBytes", "memoryFraction"}

sys.path.insert(0, str(ROOT / "scripts"))
import record_session  # noqa: E402 -- the scenario parser, read by the checks below


def read(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The CPU smoke scenario recorded by the recorder: (folder, header, events, its output)."""
    out = tmp_path_factory.mktemp("recordings")
    done = subprocess.run(
        [
            *(sys.executable, str(ROOT / "scripts" / "record_session.py"), "--device", "cpu"),
            *("--only", str(SMOKE), "--out", str(out), "--interval-ms", str(INTERVAL_MS)),
            *("--gap-s", "0.5", "--tail-s", "1.5"),
        ],
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    header, events = read(out / "cpu-smoke.jsonl")
    return out, header, events, done.stdout


def executes(events, phase):
    return [e for e in events if e.get("event") == "execute" and e["phase"] == phase]


def test_the_recorder_writes_header_comm_cells_and_marks(recorded):
    _out, header, events, stdout = recorded
    scenario = record_session.parse_scenario(SMOKE)
    assert header["format"] == "gpu-hygiene-recording" and header["version"] == 1
    assert header["scenario"] == "cpu-smoke"
    assert header["description"] == scenario.description and "CPU" in header["description"]
    recorded_at = datetime.datetime.fromisoformat(header["recorded"].replace("Z", "+00:00"))
    assert abs(recorded_at.timestamp() - header["t0"]) < 1
    assert set(header["env"]) == ENV_KEYS
    assert header["env"]["device"] == "cpu" and header["env"]["agent"] == AGENT_VERSION
    assert header["env"]["totalBytes"] is None and header["env"]["memoryFraction"] is None
    assert header["env"]["torch"] and header["env"]["python"].count(".") == 2

    # time order, both directions; the browser's comm_open first, the agent's hello first
    ats = [e["at"] for e in events]
    assert ats == sorted(ats) and ats[0] >= 0
    assert events[0] == {
        "at": events[0]["at"],
        "dir": "in",
        "data": {"protocol": PROTOCOL, "type": "configure", "sampleIntervalMs": INTERVAL_MS},
    }
    out = [e for e in events if e.get("dir") == "out"]
    assert out[0]["data"]["type"] == "hello" and out[0]["data"]["devices"] == []
    assert {e["data"]["type"] for e in out} <= KINDS
    assert all(e["data"]["protocol"] == PROTOCOL for e in out)
    # samples: the agent's seq and t rise with the recorded at; a CPU sample lists no device
    samples = [e for e in out if e["data"]["type"] == "sample"]
    assert len(samples) >= 10
    seqs = [s["data"]["seq"] for s in samples]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    ts = [s["data"]["t"] for s in samples]
    assert ts == sorted(ts)
    assert all(abs((s["data"]["t"] - header["t0"]) - s["at"]) < 1.0 for s in samples)
    assert all(s["data"]["devices"] == [] for s in samples)
    assert any(s["data"]["busy"] for s in samples) and not samples[-1]["data"]["busy"]

    # every cell: a start with its code, then an end with its execution count and status
    starts, ends = executes(events, "start"), executes(events, "end")
    assert [e["cell"] for e in starts] == [c.index for c in scenario.cells] == [0, 1, 2, 3, 4]
    assert [e["code"] for e in starts] == [c.code for c in scenario.cells]
    assert [e["cell"] for e in ends] == [0, 1, 2, 3, 4]
    assert [e["executionCount"] for e in ends] == [1, 2, 3, 4, 5]
    assert [e["status"] for e in ends] == ["ok", "ok", "ok", "ok", "error"]
    assert ends[4]["error"].startswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied")
    assert "error" not in ends[0]
    for start, end, later in zip(starts, ends, [*starts[1:], None]):
        assert start["at"] < end["at"] and (later is None or end["at"] < later["at"])
    # an inventory for every cell, sent while its request ran
    inventories = [e for e in out if e["data"]["type"] == "inventory"]
    assert [i["data"]["executionCount"] for i in inventories] == [None, 1, 2, 3, 4, 5]
    for cell, inventory in zip(starts, inventories[1:]):
        assert inventory["at"] > cell["at"]
    # the older model held only by the output cache, as the browser will be told
    (older,) = [m for m in inventories[3]["data"]["models"] if m["stale"]]
    assert {h["name"] for h in older["holders"]} == {"Out[2]", "_2", "__"}
    # the four marks of the validation loop, inside its cell, not in the kernel's messages
    marks = [e for e in events if e.get("event") == "mark"]
    assert [(m["name"], m["step"]) for m in marks] == [("step", i) for i in range(4)]
    assert all(starts[3]["at"] <= m["at"] <= ends[3]["at"] + 0.5 for m in marks)
    assert "cpu-smoke.jsonl" in stdout and "4 marks" in stdout


def test_the_committed_cpu_recording_is_of_the_smoke_scenario_as_it_is(recorded):
    """test/recordings/cpu-smoke.jsonl (the Galata spec's) was recorded from this scenario file
    on the CPU; re-record it after changing the scenario."""
    _out, fresh_header, fresh, _stdout = recorded
    header, events = read(COMMITTED)
    assert {k: v for k, v in header.items() if k not in ("recorded", "t0", "env")} == {
        k: v for k, v in fresh_header.items() if k not in ("recorded", "t0", "env")
    }
    assert header["env"]["device"] == "cpu"
    assert [e["code"] for e in executes(events, "start")] == [
        e["code"] for e in executes(fresh, "start")
    ]
    assert [e["status"] for e in executes(events, "end")] == ["ok", "ok", "ok", "ok", "error"]


@pytest.fixture(scope="module")
def views(request, tmp_path_factory):
    """``kernel_driver.gpu_views`` of the browser's modules (compiled here with the project's
    tsc, or beside ``--cleanup-js``); skips without node, or without tsc and ``--cleanup-js``."""
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
    return kd.gpu_views(folder, node)


def replay_kernel(monkeypatch, folder, **env):
    monkeypatch.setenv("JUPYTER_PATH", str(REPLAY_KERNELS))
    return Kernel(
        kernel_name="gpu-hygiene-replay", env={"GPU_HYGIENE_RECORDINGS": str(folder), **env}
    )


def comm_messages(kernel, comm_id):
    """The comm_msg messages of ``comm_id`` the driver already read (no more reading)."""
    return [
        m
        for m in kernel.comm_log
        if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id
    ]


def test_the_replay_kernel_answers_the_install_without_running_the_agent(recorded, monkeypatch):
    folder = recorded[0]
    kernel = replay_kernel(monkeypatch, folder)
    try:
        install = kernel.inject({"sampleIntervalMs": 1000})  # asserts status "ok"
        assert install.outputs == []
        state = kernel.evaluate(
            agent=f"{MODULE!r} in __import__('sys').modules",
            threads=f"sum(t.name == {THREAD!r} for t in __import__('threading').enumerate())",
            target=f"{TARGET!r} in get_ipython().kernel.comm_manager.targets",
            pid="__import__('os').getpid()",
            count="get_ipython().execution_count",
        )
        assert state["agent"] is False and state["threads"] == 0
        assert state["target"] is True
        assert state["count"] == 1  # the silent install counted no cell
        comm = kernel.open_comm(INTERVAL_MS, wait=False)
        (hello,) = comm.wait_for("hello")
        assert hello["pid"] == state["pid"] and hello["devices"] == [] and hello["torch"] is None
        assert hello["protocol"] == PROTOCOL and "no recording replayed" in hello["nvmlError"]
    finally:
        kernel.shutdown()


class Replayed(NamedTuple):
    """One ``%gpu_replay cpu-smoke --speed 20`` in a fresh replay kernel: the comm messages
    the driver had read when the cell's idle came (``first``: the hello answering the comm_open,
    ``got``: those of the replay), the cell's ``result``, and ``after``: the comm messages once a
    later ``inventory`` request had time for an answer."""

    first: list
    got: list
    result: object
    after: list


@pytest.fixture(scope="module")
def replayed(recorded):
    with pytest.MonkeyPatch.context() as monkeypatch:
        kernel = replay_kernel(monkeypatch, recorded[0])
    try:
        kernel.inject()
        comm = kernel.open_comm(INTERVAL_MS, wait=False)
        comm.wait_for("hello")
        # a browser request before the replay: accepted, answered by nothing
        comm.send({"protocol": PROTOCOL, "type": "inventory"})
        kernel.pump(0.5)
        first = comm_messages(kernel, comm.comm_id)
        result = kernel.run(f"%gpu_replay cpu-smoke --speed {SPEED}", timeout=120)
        got = comm_messages(kernel, comm.comm_id)[len(first) :]
        # and one after it
        comm.send({"protocol": PROTOCOL, "type": "inventory"})
        kernel.pump(0.5)
        return Replayed(first, got, result, comm_messages(kernel, comm.comm_id))
    finally:
        kernel.shutdown()


def test_gpu_replay_plays_the_recording_through_the_comm_and_blocks(recorded, replayed):
    _folder, _header, events, _stdout = recorded
    out = [e for e in events if e.get("dir") == "out"]
    span = out[-1]["at"] - out[0]["at"]
    assert [m["content"]["data"]["type"] for m in replayed.first] == ["hello"]
    result, got = replayed.result, replayed.got
    assert result.error is None and result.stderr == ""
    # blocked until the last message was sent: all of them came before the cell's idle
    assert len(got) == len(out)
    assert result.stdout.startswith(f"replayed {len(out)} messages of cpu-smoke in ")
    # the kernel prints the duration to one decimal (0.3 for anything in [0.25, 0.35)): the
    # bound allows that rounding, not more
    seconds = float(result.stdout.split(" in ")[1].split()[0])
    assert seconds + 0.05 >= 0.9 * span / SPEED
    # the recorded messages in order, equal but for t, every t moved by one offset
    datas = [m["content"]["data"] for m in got]
    assert [d["type"] for d in datas] == [e["data"]["type"] for e in out]
    offsets = [d["t"] - e["data"]["t"] for d, e in zip(datas, out) if "t" in d]
    assert len(offsets) > 10 and max(offsets) - min(offsets) < 1e-5
    first_t = next(e["data"]["t"] for e in out if "t" in e["data"])
    replay_start = got[0]["header"]["date"].timestamp()
    assert abs(first_t + offsets[0] - replay_start) < 0.5
    for data, event in zip(datas, out):
        expected = dict(event["data"])
        if "t" in expected:
            expected["t"] = data["t"]
        assert data == expected
    # at the recorded pace divided by the speed (the kernel's send times): never early, and
    # not late overall
    sent = [m["header"]["date"].timestamp() - replay_start for m in got]
    due = [(e["at"] - out[0]["at"]) / SPEED for e in out]
    assert all(s >= d - 0.05 for s, d in zip(sent, due))
    assert sent[-1] < due[-1] + 2.0
    # requests before and after the replay were ignored: recorded inventories only
    assert len(replayed.after) == len(replayed.first) + len(out)


def test_the_browser_shows_the_replayed_session(recorded, replayed, views):
    """The messages the replay sent, through the browser's own validation, model and gauge
    (the compiled TypeScript, as test_on_this_gpu.py runs it): none dropped, the recorded
    kernel's hello, the two MLPs of the recorded session, one of them stale."""
    hello = recorded[2][1]["data"]
    messages = [m["content"]["data"] for m in replayed.first + replayed.got]
    shown = views(
        {
            "kernelId": "replayed",
            "path": "replay.ipynb",
            "messages": messages,
            "server": None,
            "now": messages[-1]["t"] * 1000,
        }
    )
    assert shown["dropped"] == []
    # the kernel process's resident RAM where the agent sends it (0.12.0), else the models' RAM
    assert re.fullmatch(r"No GPU · 2 models( · \S+ \S+ RAM| \(.+ RAM\))", shown["gauge"]["text"])
    tooltip = "\n".join(shown["gauge"]["tooltip"])
    assert f"VRAM not measurable: {hello['nvmlError']}" in tooltip
    assert "Live models: 2 (1 stale)" in tooltip


def test_the_hello_of_gpu_hygiene_replay_answers_the_comm_and_is_not_sent_twice(
    recorded, monkeypatch
):
    folder, _header, events, _stdout = recorded
    out = [e["data"] for e in events if e.get("dir") == "out"]
    kernel = replay_kernel(monkeypatch, folder, GPU_HYGIENE_REPLAY="cpu-smoke")
    try:
        kernel.inject()
        comm = kernel.open_comm(INTERVAL_MS, wait=False)
        (hello,) = comm.wait_for("hello")
        assert hello == out[0]  # the recorded agent's hello: its pid, its Python
        result = kernel.run(f"%gpu_replay {folder / 'cpu-smoke.jsonl'} --speed 50")
        assert result.stdout.startswith(f"replayed {len(out) - 1} messages of cpu-smoke in ")
        datas = comm.messages()
        assert [d["type"] for d in datas] == [d["type"] for d in out]
        assert [d for d in datas if d["type"] == "hello"] == [out[0]]
    finally:
        kernel.shutdown()
