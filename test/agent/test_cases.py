"""Acceptance cases C01, C03, C05, C08, C10 and C11 (shared/cases): the notebooks' own cells,
run in order in a fresh kernel with the agent injected, checked against "extension should" in
cases/README.md. CPU only here: DEV falls back to "cpu", VRAM figures print n/a, bytes are
reported under "cpu"."""

import re

import pytest
from conftest import holder_names, model_by_order, read_cells

CLEAN_MARKER = "# gpu-hygiene: clear_gpu"

pytestmark = pytest.mark.timeout(150)

MiB = 2**20


class Session:
    """A case notebook being run top to bottom in one kernel, agent injected at start."""

    def __init__(self, new_kernel, case_id):
        self.cells = read_cells(case_id)
        self.kernel = new_kernel()
        self.kernel.inject({"sampleIntervalMs": 1000})
        self.comm = self.kernel.open_comm(1000)
        self.results = {}

    def run(self, number, code=None, expect_error=False):
        """Run code cell ``number`` (1-based) or ``code`` in its place; returns (result,
        inventory sent after it). The execution count must equal the cell's number."""
        comm = self.comm
        n = len(comm.messages("inventory"))
        result = self.kernel.run(code if code is not None else self.cells[number - 1])
        assert result.execution_count == number
        if expect_error:
            assert result.error is not None
        else:
            assert result.error is None, result.error
        inventory = comm.wait_for("inventory", n + 1, timeout=60)[n]
        assert inventory["executionCount"] == number
        self.results[number] = result
        return result, inventory


def test_c01_rerun_stacks_a_second_instance_pinned_by_out(new_kernel):
    s = Session(new_kernel, "C01")
    s.run(1)
    _, inventory = s.run(2)
    (first,) = inventory["models"]
    assert first["stale"] is False
    _, inventory = s.run(3)
    older, newer = model_by_order(inventory)
    assert older["id"] == first["id"]
    assert older["family"] == newer["family"] == "ultralytics"
    assert older["label"] == newer["label"] == "YOLO (yolov8n.yaml)"
    # the older one is reachable only through IPython's output history
    assert holder_names(older) == {"Out[2]", "_2", "__"}
    assert older["stale"] is True
    assert holder_names(newer) == {"model", "_", "_3", "Out[3]"}
    assert newer["stale"] is False

    result, inventory = s.run(4)
    assert "live DetectionModel: 2" in result.stdout
    assert "'Out': [2]" in result.stdout and "'_2'" in result.stdout
    assert len(inventory["models"]) == 2

    # the notebook's reference clear_gpu cell (no marker: no `cleaned` message)
    assert CLEAN_MARKER not in s.cells[4]
    _, inventory = s.run(5)
    (survivor,) = inventory["models"]
    assert survivor["id"] == newer["id"]
    assert holder_names(survivor) == {"model"}
    result, _ = s.run(6)
    assert "live DetectionModel: 1" in result.stdout
    assert s.comm.messages("cleaned") == []


def test_c01_with_the_generated_clean_cell(new_kernel, generate_clean_cell):
    s = Session(new_kernel, "C01")
    for number in (1, 2, 3):
        _, inventory = s.run(number)
    older, newer = model_by_order(inventory)
    _, inventory = s.run(4)
    one = older["bytes"]["cpu"]
    clean = generate_clean_cell(inventory)
    assert "def _gpu_hygiene_clear_gpu(out_keys=(2,)):" in clean
    assert f"# Output cache: {older['label']}, {one / MiB:.1f} MiB, held by Out[2], _2, __" in clean
    result, inventory = s.run(5, clean)
    assert result.outputs == []
    (cleaned,) = s.comm.messages("cleaned")
    assert cleaned["executionCount"] == 5
    assert cleaned["models"] == {"before": 2, "after": 1}
    assert cleaned["freed"] == {"cpu": one}
    # one model's parameters (fp32), plus its BatchNorm buffers
    assert abs(one - older["parameters"] * 4) < MiB
    assert [m["id"] for m in inventory["models"]] == [newer["id"]]
    assert holder_names(inventory["models"][0], "variable") == {"model"}
    result, _ = s.run(6)
    assert "live DetectionModel: 1" in result.stdout
    # the output cache works as before (a displayed value becomes _, _7 and Out[7], the
    # previous _ rolls to __), and the live model's own entries were left alone
    _, inventory = s.run(7, "model")
    assert holder_names(inventory["models"][0]) == {
        "model",
        "_",
        "_7",
        "Out[7]",
        "__",
        "_3",
        "Out[3]",
    }


def test_c03_underscore_names_keep_the_model_after_model_none(new_kernel):
    s = Session(new_kernel, "C03")
    s.run(1)
    _, inventory = s.run(2)
    assert holder_names(inventory["models"][0]) == {"model"}
    _, inventory = s.run(3)
    assert holder_names(inventory["models"][0]) == {"model", "_", "_3", "Out[3]"}
    result, inventory = s.run(4)
    assert result.stdout.startswith("alive: True")
    (model,) = inventory["models"]
    assert holder_names(model) == {"_", "_3", "Out[3]"}
    assert model["stale"] is True
    for number in (5, 6, 7):
        _, inventory = s.run(number)
    (model,) = inventory["models"]
    # the rolling _, __, ___ slots moved on; the numbered ones never do
    assert holder_names(model) == {"_3", "Out[3]"}
    assert model["stale"] is True
    result, inventory = s.run(8)
    assert result.stdout.startswith("alive: True")
    assert "'user_ns': ['_3']" in result.stdout
    _, inventory = s.run(9)  # the notebook's clear_gpu cell
    assert inventory["models"] == []
    result, _ = s.run(10)
    assert result.stdout.startswith("alive: False")


def test_c05_traceback_keeps_the_activation(new_kernel):
    s = Session(new_kernel, "C05")
    s.run(1)
    s.run(2)
    result, inventory = s.run(3, expect_error=True)
    assert result.error["ename"] == "MemoryError"
    assert inventory["models"] == []
    last = inventory["lastError"]
    assert last["type"] == "MemoryError"
    assert last["message"] == "simulated out-of-memory (no CUDA here)"
    frames = {f["name"]: f for f in last["frames"]}
    assert frames["train_step"]["bytes"] == {"cpu": 256 * MiB}
    assert frames["train_step"]["tensors"] == 1
    assert last["bytes"] == {"cpu": 256 * MiB}
    # the failed cell, then the function; IPython's own run_code frame is left out
    assert [(f["name"], f["tensors"]) for f in last["frames"]] == [
        ("<module>", 0),
        ("train_step", 1),
    ]

    for number in (4, 5, 6):
        result, inventory = s.run(number)
        alive = re.search(r"activation alive: (True|False)", result.stdout).group(1) == "True"
        last = inventory["lastError"]
        if number < 6:
            assert alive
        # Python <= 3.12: clear_frames cannot free what the formatter's f_locals snapshot holds
        # (cell 6 may free it on 3.13+); the report follows the truth either way.
        held = {f["name"]: f["bytes"] for f in last["frames"]}.get("train_step")
        assert (held == {"cpu": 256 * MiB}) == alive, (number, held, alive)
    _, inventory = s.run(7)  # the notebook's clear_gpu cell
    assert inventory["lastError"] is None
    result, _ = s.run(8)
    assert "activation alive: False" in result.stdout


def test_c05_generated_clean_cell_right_after_the_failure(new_kernel, generate_clean_cell):
    # Right after the failure, IPython also keeps the exception in
    # last_execution_result.error_in_exec; the generated cell drops that holder too.
    s = Session(new_kernel, "C05")
    s.run(1)
    s.run(2)
    _, inventory = s.run(3, expect_error=True)
    assert inventory["lastError"]["bytes"] == {"cpu": 256 * MiB}
    result, inventory = s.run(4, generate_clean_cell(inventory))
    assert result.outputs == []
    assert inventory["lastError"] is None
    (cleaned,) = s.comm.messages("cleaned")
    assert cleaned["models"] == {"before": 0, "after": 0} and cleaned["freed"] == {}
    result, _ = s.run(5, "print('activation alive:', ACTS[-1]() is not None)")
    assert result.stdout == "activation alive: False\n"


def test_c05_the_traceback_is_a_root_with_the_activation_bytes(new_kernel):
    s = Session(new_kernel, "C05")
    s.run(1)
    s.run(2)
    _, inventory = s.run(3, expect_error=True)
    roots = {(r["kind"], r["name"]): r for r in inventory["roots"]}
    assert roots[("traceback", "last traceback (train_step)")]["bytes"] == {"cpu": 256 * MiB}
    (activation,) = [t for t in inventory["tensors"] if t["kind"] == "traceback"]
    assert activation["bytes"] == 256 * MiB
    assert activation["path"].startswith("last traceback (train_step).")


def test_c08_a_list_of_losses_keeps_four_graphs(new_kernel, generate_clean_cell):
    s = Session(new_kernel, "C08")
    s.run(1)
    s.run(2)
    result, inventory = s.run(3)
    assert "element keeps a graph: True NllLossBackward0" in result.stdout
    (graph,) = inventory["graphs"]
    assert (graph["name"], graph["path"]) == ("val_losses", "val_losses")
    assert graph["container"] == "list"
    assert graph["count"] == 4 and graph["gradFn"] == "NllLossBackward0"
    assert graph["truncated"] is False
    # the case's figure ([V-gpu]): each graph keeps two 128 MiB ReLU outputs; here on the CPU
    # the same graphs are measured in RAM
    assert 4 * 256 * MiB <= graph["bytes"]["cpu"] <= 4 * 256 * MiB + 16 * MiB
    (root,) = [r for r in inventory["roots"] if r["name"] == "val_losses"]
    assert 4 * 256 * MiB <= root["bytes"]["cpu"] <= graph["bytes"]["cpu"]
    assert inventory["roots"][0]["name"] == "val_losses"  # the largest holder first
    # the notebook's fix (floats instead of tensors) ends the graphs
    _, inventory = s.run(4)
    assert inventory["graphs"] == []
    assert all(r["name"] != "val_losses" for r in inventory["roots"])
    s.run(5)
    result, inventory = s.run(6)
    assert "graph kept: False" in result.stdout
    assert inventory["graphs"] == []


def test_c10_a_deleted_tensor_is_no_holder_and_nothing_is_stale(new_kernel):
    s = Session(new_kernel, "C10")
    s.run(1)
    _, inventory = s.run(2)
    (blob,) = inventory["tensors"]
    assert blob == {
        "path": "blob",
        "kind": "variable",
        "device": "cpu",
        "bytes": 1024 * MiB,
        "shape": [1024 * MiB],
        "dtype": "uint8",
        "gradFn": None,
    }
    assert inventory["roots"][0] == {
        "kind": "variable",
        "name": "blob",
        "bytes": {"cpu": 1024 * MiB},
        "models": 0,
        "tensors": 1,
    }
    for number in (3, 4):
        _, inventory = s.run(number)
        assert inventory["tensors"] == [] and inventory["models"] == []
        assert inventory["graphs"] == [] and inventory["lastError"] is None
        # CUDA figures (reserved stays, then drops with empty_cache) are checked by the GPU run
        assert inventory["unattributed"] == {}


def test_c11_small_tensors_no_models_no_stale_warning(new_kernel):
    s = Session(new_kernel, "C11")
    result, _ = s.run(1)
    assert result.stdout.startswith("before any CUDA call: None")
    s.run(2)
    _, inventory = s.run(3)
    assert inventory["models"] == [] and inventory["tensors"] == []  # all below 1 MiB
    names = {r["name"] for r in inventory["roots"]}
    assert {"x", "a", "b", "c"} <= names
    _, inventory = s.run(4)
    assert not {"x", "a", "b", "c"} & {r["name"] for r in inventory["roots"]}
    assert inventory["graphs"] == []
