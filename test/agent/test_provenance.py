"""Issue 24 in a real kernel: which cell and line allocated the memory still alive.

With ``provenance`` configured on, the agent turns torch's allocation-stack recording on once
the user's code has initialised CUDA, and each inventory carries ``provenance``: the live
blocks grouped by the notebook cell and line that allocated them (IPython's cell files mapped
back to execution counts), and each root row its ``origins``.

On the CPU, CUDA cannot exist: ``fake_cuda_history.py`` stands in for torch's recorder and
``_snapshot()`` (it is the one mock here, said in its docstring), over the kernel's real
storages; the cell files, the line texts, the roots and the agent are real. On CUDA
(``[cuda]``, ``make gpu-check``) the recorder is torch's own, and the live bytes must be
``torch.cuda.memory_allocated()`` read right after the inventory.
"""

import gzip
import json
import os
from pathlib import Path

import kernel_driver as kd
import pytest
from checks import LIVE, MiB
from conftest import DEVICES

pytestmark = [pytest.mark.timeout(300)]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "inventory_provenance.json"
FAKE = (Path(__file__).resolve().parent / "fake_cuda_history.py").read_text()
CELLS = [
    "import torch\nDEV = {dev!r}",
    "warm = torch.zeros(1, device=DEV)",  # the first CUDA use: recording starts after it
    "model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),"
    " torch.nn.Linear(4096, 1024)).to(DEV)",
    "x = torch.randn(512, 1024, device=DEV)\nfeats = []",
    "def step(batch):\n    y = model(batch)\n    return y.relu()",
    "for _ in range(8):\n    feats.append(step(x))",
    "def fail():\n    t = torch.ones(1 << 22, device=DEV)\n    raise ValueError('boom')\n"
    "try:\n    fail()\nexcept ValueError as e:\n    err = e",
]


def write_fixture(inventory):
    """The last inventory's provenance, roots and kept errors, for the panel's jest spec
    (``test/unit/provenance.spec.ts``): compared with the committed
    ``test/fixtures/inventory_provenance.json`` (``UPDATE_FIXTURES=1`` writes it first). The
    figures are the fake recorder's over the CPU kernel's real storages; ``costMs`` and the
    addresses (``valueId``) are left out."""
    fact = {k: v for k, v in inventory["provenance"].items() if k != "costMs"}
    data = {
        "protocol": inventory["protocol"],
        "executionCount": inventory["executionCount"],
        "provenance": fact,
        "roots": [{k: v for k, v in r.items() if k != "valueId"} for r in inventory["roots"]],
        "keptErrors": [
            {k: v for k, v in e.items() if k != "valueId"} for e in inventory["keptErrors"]
        ],
    }
    if os.environ.get("UPDATE_FIXTURES"):
        FIXTURE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    assert FIXTURE.exists(), f"run with UPDATE_FIXTURES=1 to write {FIXTURE}"
    assert json.loads(FIXTURE.read_text(encoding="utf-8")) == data


def configure(s, on):
    s.comm.send({"protocol": kd.PROTOCOL, "type": "configure", "provenance": on})


def group_at(fact, cell, line):
    return [g for g in fact["groups"] if (g["kind"], g["cell"], g["line"]) == ("cell", cell, line)]


def origins_of(inventory, name):
    (row,) = [r for r in inventory["roots"] if r["name"] == name]
    groups = inventory["provenance"]["groups"]
    return [
        (groups[o["group"]]["cell"], groups[o["group"]]["line"], o["bytes"])
        for o in row.get("origins", [])
    ]


@pytest.mark.parametrize("device", DEVICES)
def test_live_memory_by_cell_and_line(session, check, device):
    s = session(name="provenance")
    s.run(code=CELLS[0].format(dev=s.dev))
    if not s.cuda:
        s.silent(f"exec(compile({FAKE!r}, '<fake_cuda_history>', 'exec'), {{}})")
    _, first = s.run(code=CELLS[1])
    assert "provenance" not in first  # not asked for: nothing read, nothing said
    configure(s, True)
    for code in CELLS[2:]:
        result, inventory = s.run(code=code)
        assert result.stdout == "" and result.stderr == ""
    fact = inventory["provenance"]
    truth = s.torch_memory()[0] if s.cuda else s.evaluate(live=LIVE)["live"]
    check.row(
        "24.1 live bytes of the snapshot",
        "torch.cuda.memory_allocated()" if s.cuda else "the bytes of every live storage",
        f"{fact['liveBytes']} B; truth {truth} B",
        fact["liveBytes"] == truth,
    )
    assert fact["recording"] is True and fact["since"] == 3, fact
    assert fact["skipped"] == 0 and fact["read"] == fact["liveBlocks"]
    traced = sum(g["bytes"] for g in fact["groups"])
    assert traced + fact["untracedBytes"] == fact["liveBytes"]
    # err's frame keeps t: allocated in cell 7, line 2, 16 MiB, and err's row says so
    (kept,) = group_at(fact, 7, 2)
    check.row(
        "24.2 err's tensor: cell [7] line 2",
        "16 MiB, text 't = torch.ones(1 << 22, device=DEV)', name fail",
        f"{kept['bytes']} B, {kept['text']!r}, {kept['name']}",
        (kept["bytes"], kept["text"], kept["name"])
        == (16 * MiB, "t = torch.ones(1 << 22, device=DEV)", "fail"),
    )
    assert origins_of(inventory, "err") == [(7, 2, 16 * MiB)]
    # feats: the outputs of step (defined in cell 5) run by the loop of cell 6
    (relu,) = group_at(fact, 5, 3)
    assert relu["via"] == {"cell": 6, "line": 2} and relu["name"] == "step"
    assert relu["bytes"] == 8 * 512 * 1024 * 4 and relu["blocks"] == 8
    feats = origins_of(inventory, "feats")
    assert feats[0][:2] in ((5, 2), (5, 3)), feats
    # model: its weights, allocated by .to(DEV) in cell 3 (copies on CUDA, the same on CPU)
    model = origins_of(inventory, "model")
    check.row(
        "24.3 the model's weights: cell [3] line 1",
        "every parameter byte (33,574,912 B) from cell 3",
        f"{model}",
        model[:1] == [(3, 1, 4 * (1024 * 4096 + 4096 + 4096 * 1024 + 1024))],
    )
    # x was made in cell 4 and is named by x: its own group
    (xs,) = group_at(fact, 4, 1)
    assert xs["bytes"] == 512 * 1024 * 4 and xs["text"].startswith("x = torch.randn")
    if not s.cuda:
        write_fixture(inventory)
    # off again: the next inventory reads nothing and says nothing
    configure(s, False)
    _, after = s.run(code="del err")
    assert "provenance" not in after
    if not s.cuda:
        assert s.evaluate(c="list(__import__('torch').cuda.memory._fake_calls)")["c"] == [
            "state",
            None,
        ]


def test_not_before_the_users_first_cuda_use(session):
    """Asked for before torch is imported, then before any CUDA use: the fact says why nothing
    is recorded, and the agent calls nothing of torch's recorder (CPU torch: CUDA never
    initialises, so it never starts)."""
    s = session(name="provenance-waits")
    configure(s, True)
    _, inventory = s.run(code="x = 1")
    assert inventory["provenance"] == {"recording": False, "since": None, "reason": "torch"}
    _, inventory = s.run(code="import torch\nt = torch.ones(4)")
    assert inventory["provenance"] == {"recording": False, "since": None, "reason": "cuda"}
    assert s.evaluate(i="__import__('torch').cuda.is_initialized()")["i"] is False


def test_a_torch_without_the_recorder_says_so(session):
    """torch 2.0's ``_record_memory_history(enabled: bool, record_context, ...)`` takes no
    ``context``: the fact says "unsupported" with the error, and the limit ``provenance`` is
    noted once; the cell runs as always."""
    s = session(name="provenance-old-torch")
    s.run(code="import torch")
    s.silent(f"exec(compile({FAKE!r}, '<fake_cuda_history>', 'exec'), {{}})")
    s.silent(
        "import torch as _t\n"
        "def _old(enabled=True, record_context=True, trace_alloc_max_entries=1,"
        " trace_alloc_record_context=False, device=None):\n    pass\n"
        "_t.cuda.memory._record_memory_history = _old\ndel _t, _old"
    )
    configure(s, True)
    result, inventory = s.run(code="y = torch.ones(8)")
    fact = inventory["provenance"]
    assert (fact["recording"], fact["reason"]) == (False, "unsupported"), fact
    assert "context" in fact["error"]
    assert {"area": "provenance", "library": "torch"}.items() <= inventory["limits"][-1].items()
    assert result.error is None and result.stdout == ""


# ---- the reduction, on a snapshot PyTorch recorded on a GPU (no kernel needed)

SNAPSHOT = Path(__file__).resolve().parents[1] / "fixtures" / "provenance_snapshot.json.gz"


@pytest.fixture(scope="module")
def provenance():
    return kd.load_agent().provenance


@pytest.fixture(scope="module")
def recorded():
    """``bench/provenance_gpu.py``'s kernel on an H100 (torch 2.11, ipykernel's cell files):
    its snapshot (live and free blocks with frames, innermost first), IPython's file map,
    the cells and ``torch.cuda.memory_allocated()`` read right after the snapshot."""
    with gzip.open(SNAPSHOT, "rt", encoding="utf-8") as f:
        return json.load(f)


def test_a_recorded_snapshot_by_cell_and_line(provenance, recorded):
    addresses = {}
    fact = provenance.reduce_snapshot(recorded, recorded["filename_map"], addresses=addresses)
    assert fact["liveBytes"] == recorded["memory_allocated"]
    rows = [(g["cell"], g["line"], g["name"], g["via"], g["bytes"]) for g in fact["groups"]]
    assert rows[1:] == [
        (3, 3, "step", {"cell": 4, "line": 2}, 8 * 512 * 1024 * 4),  # y.relu(), kept by feats
        (6, 2, "fail", {"cell": 6, "line": 5}, 16 * MiB),  # t, kept by err's frames
        (7, 1, "<module>", None, 4 * MiB),  # kept = [torch.empty(1 << 18) ...]
        (2, 1, "<module>", None, 2 * MiB),  # x
        (5, 1, "<module>", None, 512),  # loss (its graph freed by backward)
    ]
    # model(batch) inside step: the activations feats' graphs keep (and cuBLAS's workspace)
    assert rows[0][:4] == (3, 2, "step", {"cell": 4, "line": 2})
    # cell 1 ran before recording; the gradients were made on autograd's thread: no stack
    assert fact["untracedBytes"] == fact["liveBytes"] - sum(g["bytes"] for g in fact["groups"])
    assert fact["untracedBytes"] >= 2 * 33574912  # the weights and their gradients at least
    assert len(addresses) == fact["liveBlocks"] - fact["untracedBlocks"]


def test_torch_2_1_blocks_without_address_are_placed_by_their_segment(provenance, recorded):
    """torch 2.1's snapshot gives segments an address and blocks none: a block is at its
    segment's address plus the sizes of the blocks before it, free ones included."""
    with_addresses = {}
    provenance.reduce_snapshot(recorded, recorded["filename_map"], addresses=with_addresses)
    old = json.loads(json.dumps(recorded))
    for segment in old["segments"]:
        for block in segment["blocks"]:
            del block["address"]
    placed = {}
    provenance.reduce_snapshot(old, recorded["filename_map"], addresses=placed)
    assert placed == with_addresses and placed


def test_a_deep_stack_still_finds_its_cell(provenance):
    """A Lightning or generate() stack: 150 library frames above the cell's."""
    frames = [
        {"filename": f"/lib/site-packages/lightning/m{i}.py", "line": i, "name": "f"}
        for i in range(150)
    ] + [{"filename": "/tmp/ipykernel_1/9.py", "line": 4, "name": "<module>"}]
    snap = {
        "segments": [
            {
                "device": 0,
                "blocks": [
                    {"address": 4096, "size": 1024, "state": "active_allocated", "frames": frames}
                ],
            }
        ]
    }
    (group,) = provenance.reduce_snapshot(snap, {"/tmp/ipykernel_1/9.py": 12})["groups"]
    assert (group["kind"], group["cell"], group["line"]) == ("cell", 12, 4)


def test_the_same_cell_text_run_twice_says_so(provenance):
    """ipykernel names a cell's file by its text: a re-run shares the file, and IPython's map
    keeps the last count; the group names the others (``sameCode``) and the cell's id."""
    cell = "/tmp/ipykernel_1/5.py"
    frames = [{"filename": cell, "line": 1, "name": "<module>"}]
    snap = {
        "segments": [
            {
                "device": 0,
                "address": 0,
                "blocks": [
                    {"size": 512, "state": "active_allocated", "frames": frames},
                    {"size": 512, "state": "active_allocated", "frames": frames},
                ],
            }
        ]
    }
    (group,) = provenance.reduce_snapshot(
        snap, {cell: 9}, runs={cell: [4, 9]}, cell_ids={9: "abc-123"}
    )["groups"]
    assert (group["cell"], group["sameCode"], group["cellId"], group["blocks"]) == (
        9,
        [4],
        "abc-123",
        2,
    )


def test_someone_elses_recording_is_recognised(provenance, recorded):
    """Only an event trace of more than one event (``enabled="all"``, memory_viz's) tells:
    ``enabled="state"`` keeps one (the agent's own recording too), and frames stay on live
    blocks after any recording is turned off (the recorded snapshot has them)."""
    assert provenance.recording_already(recorded) is False
    event = {"action": "alloc", "addr": 1, "size": 512}
    assert provenance.recording_already(dict(recorded, device_traces=[[event]])) is False
    traced = dict(recorded, device_traces=[[], [event, dict(event, action="snapshot")]])
    assert provenance.recording_already(traced) is True


def fake_calls(s):
    return s.evaluate(c="list(__import__('torch').cuda.memory._fake_calls)")["c"]


def test_reruns_resent_inventories_failures_and_stopping(session):
    """In a real kernel (CPU, the recorder's stand-in): the same cell text run twice says so;
    a re-sent inventory (nothing changed) reads the origins again, and after the setting
    goes off says nothing of them; a snapshot that raises costs the origins of that cell, not
    its inventory; the agent's uninstall stops the recording it started."""
    s = session(name="provenance-reruns")
    s.run(code="import torch\nkeep = []")
    s.silent(f"exec(compile({FAKE!r}, '<fake_cuda_history>', 'exec'), {{}})")
    configure(s, True)
    s.run(code="keep.append(torch.ones(1 << 18))")
    _, inventory = s.run(code="keep.append(torch.ones(1 << 18))")
    (group,) = [g for g in inventory["provenance"]["groups"] if g["kind"] == "cell"]
    assert (group["cell"], group["sameCode"], group["bytes"]) == (3, [2], 2 * MiB)
    assert origins_of(inventory, "keep") == [(3, 1, 2 * MiB)]
    # nothing changed: the inventory is re-sent, its origins read again
    _, same = s.run(code="pass")
    assert same["skipped"] is True and origins_of(same, "keep") == [(3, 1, 2 * MiB)]
    configure(s, False)
    _, off = s.run(code="pass")
    assert off["skipped"] is True and "provenance" not in off
    assert all("origins" not in row for row in off["roots"])
    # on again; a snapshot that raises: the fact says so, the inventory still comes
    configure(s, True)
    s.silent(
        "import torch as _t\n_t.cuda.memory._real_snapshot = _t.cuda.memory._snapshot\n"
        "def _boom(device=None):\n    raise RuntimeError('snapshot failed')\n"
        "_t.cuda.memory._snapshot = _boom\ndel _t, _boom"
    )
    result, failed = s.run(code="keep.append(torch.ones(8))")
    assert result.error is None and result.stdout == "" and result.stderr == ""
    assert failed["provenance"]["error"] == "RuntimeError: snapshot failed"
    assert failed["provenance"]["recording"] is True and "groups" not in failed["provenance"]
    assert all("origins" not in row for row in failed["roots"])
    s.silent("import torch as _t\n_t.cuda.memory._snapshot = _t.cuda.memory._real_snapshot\ndel _t")
    assert fake_calls(s) == ["state", None, "state"]
    s.silent(f"__import__('sys').modules[{kd.MODULE!r}].uninstall()")
    assert fake_calls(s) == ["state", None, "state", None]


def test_a_recording_the_user_started_is_only_read(session):
    """The user's code records with history (memory_viz): the agent reads it (``byUser``)
    and never calls the recorder, not even when the setting goes off."""
    s = session(name="provenance-users-own")
    s.run(code="import torch")
    s.silent(f"exec(compile({FAKE!r}, '<fake_cuda_history>', 'exec'), {{}})")
    s.run(code="torch.cuda.memory._record_memory_history(enabled='all')\nmine = torch.ones(64)")
    configure(s, True)
    _, inventory = s.run(code="more = torch.ones(1 << 18)")
    fact = inventory["provenance"]
    assert (fact["recording"], fact["byUser"], fact["since"]) == (True, True, None)
    assert [(g["cell"], g["line"]) for g in fact["groups"] if g["kind"] == "cell"] == [
        (3, 1),
        (2, 2),
    ]
    configure(s, False)
    s.run(code="pass")
    assert fake_calls(s) == ["all"]


def recorder_calls(s):
    """The ``enabled`` of every ``_record_memory_history`` call in the kernel: the fake's
    record on the CPU; on CUDA a wrapper around torch's own, put in place by ``watch_recorder``."""
    return s.evaluate(c="list(__import__('torch').cuda.memory._fake_calls)")["c"]


def watch_recorder(s):
    """On CUDA: wrap torch's ``_record_memory_history`` to list each call's ``enabled`` (the
    real recorder still runs) as ``torch.cuda.memory._fake_calls``, as the fake does."""
    s.silent(
        "import torch as _t\n_calls = []\n_real = _t.cuda.memory._record_memory_history\n"
        "def _watched(enabled='all', *args, **kwargs):\n"
        "    _calls.append(enabled)\n    return _real(enabled, *args, **kwargs)\n"
        "_t.cuda.memory._record_memory_history = _watched\n_t.cuda.memory._fake_calls = _calls\n"
        "del _t, _calls, _real, _watched"
    )


def with_recorder(s):
    """torch imported and its CUDA (or the fake's) initialised by the user's cells; returns the
    execution count of the last."""
    s.run(code=f"import torch\nDEV = {s.dev!r}")
    if s.cuda:
        watch_recorder(s)
    else:
        s.silent(f"exec(compile({FAKE!r}, '<fake_cuda_history>', 'exec'), {{}})")
    result, _ = s.run(code="warm = torch.zeros(1, device=DEV)")
    return result.execution_count


@pytest.mark.parametrize("device", DEVICES)
def test_the_users_code_turning_recording_off_is_said_and_respected(session, device):
    """The agent records; a cell of the user's turns recording off: the fact says
    ``stopped`` in that cell, the blocks allocated before still have their origins and those
    after are untraced; the agent does not start it again (the user's code chose) nor call the
    recorder when the setting goes off; off and on again, it records again."""
    s = session(name="provenance-stopped-by-code")
    with_recorder(s)
    configure(s, True)
    for code in ("early = torch.ones(1 << 18, device=DEV)", "more = [torch.ones(8, device=DEV)]"):
        _, own = s.run(code=code)
        # torch keeps a one-event trace of its own "state" recording: still the agent's
        assert own["provenance"]["byUser"] is False and "stopped" not in own["provenance"]
    result, inventory = s.run(
        code="torch.cuda.memory._record_memory_history(enabled=None)\n"
        "late = torch.ones(1 << 19, device=DEV)"
    )
    stopped_in = result.execution_count
    fact = inventory["provenance"]
    assert (fact["recording"], fact["byUser"]) == (True, False), fact
    assert (fact.get("stopped"), fact.get("stoppedIn")) == (True, stopped_in), fact
    assert origins_of(inventory, "early") == [(stopped_in - 2, 1, MiB)]
    assert origins_of(inventory, "late") == []
    assert fact["untracedBytes"] >= 2 * MiB
    _, after = s.run(code="later = torch.ones(1 << 18, device=DEV)")
    assert after["provenance"]["stoppedIn"] == stopped_in
    assert origins_of(after, "later") == []
    assert recorder_calls(s) == ["state", None]  # the agent's start, the user's stop
    # the user's code records again: theirs now, and no "since" (the gap is untraced)
    _, back = s.run(code="torch.cuda.memory._record_memory_history(enabled='state')")
    fact = back["provenance"]
    assert (fact["byUser"], fact["since"], "stopped" in fact) == (True, None, False), fact
    s.run(code="torch.cuda.memory._record_memory_history(enabled=None)")
    assert recorder_calls(s) == ["state", None, "state", None]
    configure(s, False)
    s.run(code="pass")
    assert recorder_calls(s) == ["state", None, "state", None]  # nothing of the agent's to stop
    configure(s, True)
    result, again = s.run(code="fresh = torch.ones(1 << 18, device=DEV)")
    fact = again["provenance"]
    assert "stopped" not in fact and fact["since"] == result.execution_count, fact
    assert fact["byUser"] is False
    assert origins_of(again, "fresh") == [(result.execution_count, 1, MiB)]
    assert recorder_calls(s) == ["state", None, "state", None, "state"]


@pytest.mark.parametrize("device", DEVICES)
def test_a_users_recording_of_live_state_only_is_recognised(session, device):
    """``enabled="state"`` leaves no event trace; torch says it records
    (``torch._C._cuda_isHistoryEnabled``): the agent reads it as the user's and never calls
    the recorder."""
    s = session(name="provenance-users-state")
    with_recorder(s)
    s.run(code="torch.cuda.memory._record_memory_history(enabled='state', stacks='python')")
    configure(s, True)
    _, inventory = s.run(code="mine = torch.ones(1 << 18, device=DEV)")
    fact = inventory["provenance"]
    assert (fact["recording"], fact["byUser"], fact["since"]) == (True, True, None), fact
    assert origins_of(inventory, "mine")[0][2] == MiB
    configure(s, False)
    s.run(code="pass")
    assert recorder_calls(s) == ["state"]
    if s.cuda:
        assert s.evaluate(e="__import__('torch')._C._cuda_isHistoryEnabled()")["e"] is True


@pytest.mark.parametrize("device", DEVICES)
def test_a_recording_the_users_code_takes_over_becomes_theirs(session, device):
    """The agent records; the user's code starts memory_viz's recording (``enabled="all"``):
    it is the user's now, and the setting going off does not stop it."""
    s = session(name="provenance-taken-over")
    with_recorder(s)
    configure(s, True)
    _, own = s.run(code="a = torch.ones(1 << 18, device=DEV)")
    assert own["provenance"]["byUser"] is False
    _, inventory = s.run(
        code="torch.cuda.memory._record_memory_history(enabled='all')\n"
        "b = torch.ones(1 << 18, device=DEV)\nc = torch.ones(1 << 18, device=DEV)"
    )
    assert inventory["provenance"]["byUser"] is True
    configure(s, False)
    s.run(code="pass")
    assert recorder_calls(s) == ["state", "all"]


def test_shared_bytes_and_roots_whose_names_are_cut_alike(session):
    """An origin says what of its bytes another root keeps too (``shared``); two variables
    whose long names are cut to the same row name get no origins rather than each other's."""
    s = session(name="provenance-shared")
    with_recorder(s)
    configure(s, True)
    s.run(code="a = torch.ones(1 << 18, device=DEV)\nalone = torch.ones(1 << 18, device=DEV)")
    long_a, long_b = "v" * 600 + "_a", "v" * 600 + "_b"
    _, inventory = s.run(
        code=f"both = [a]\n{long_a} = torch.ones(1 << 18, device=DEV)\n"
        f"{long_b} = torch.ones(1 << 19, device=DEV)"
    )
    rows = {r["name"]: r for r in inventory["roots"]}
    assert rows["a"]["origins"][0] == {**rows["a"]["origins"][0], "bytes": MiB, "shared": MiB}
    assert rows["both"]["origins"][0]["shared"] == MiB
    assert "shared" not in rows["alone"]["origins"][0]
    # a cell's output named by Out[n], _n and _ is one holder: nothing of it is shared
    _, shown = s.run(code="torch.ones(1 << 18, device=DEV)")
    (out,) = [r for r in shown["roots"] if r["kind"] == "output" and r["bytes"]]
    assert out["origins"][0]["bytes"] == MiB and "shared" not in out["origins"][0], out
    cut = [r for r in inventory["roots"] if r["name"].startswith("vvv")]
    assert len(cut) == 2 and cut[0]["name"] == cut[1]["name"]
    assert all("origins" not in r for r in cut), cut
    # a re-sent inventory (nothing changed since the cell before) says the same
    _, shown = s.run(code="pass")
    _, same = s.run(code="pass")
    assert same["skipped"] is True
    assert [r.get("origins") for r in same["roots"]] == [r.get("origins") for r in shown["roots"]]
