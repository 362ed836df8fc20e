"""Inventory of real Ultralytics models on the CPU: holders, staleness, the generated clean cell."""

import pytest
from conftest import holder_names, model_by_order, ultralytics_flops_copy
from kernel_driver import kernel_needs

# compat: version-sensitive, in the subset `make test-compat-oldest` runs (scripts/compat.py)
pytestmark = [pytest.mark.timeout(150), pytest.mark.compat]

MiB = 2**20
BUILD = 'model = YOLO("yolov8n.yaml")\nmodel.to("cpu")'


def start(new_kernel, interval_ms=1000):
    kernel = new_kernel()
    kernel.inject({"sampleIntervalMs": interval_ms})
    comm = kernel.open_comm(interval_ms)
    return kernel, comm


def run_and_inventory(kernel, comm, code):
    """Run a user cell; return (result, the inventory sent after it)."""
    n = len(comm.messages("inventory"))
    result = kernel.run(code)
    assert result.error is None, result.error
    inventory = comm.wait_for("inventory", n + 1, timeout=60)[n]
    assert inventory["executionCount"] == result.execution_count
    return result, inventory


@ultralytics_flops_copy()
def test_rerun_stacks_two_yolo_models_and_the_clean_cell_frees_the_stale_one(
    new_kernel, generate_clean_cell
):
    kernel, comm = start(new_kernel)
    _, inventory = run_and_inventory(kernel, comm, "from ultralytics import YOLO")
    assert inventory["torchImported"] is True and inventory["cudaInitialized"] is False
    assert inventory["models"] == []
    assert kernel.evaluate(torch="'torch' in __import__('sys').modules")["torch"] is True

    first, inventory = run_and_inventory(kernel, comm, BUILD)
    n = first.execution_count
    assert first.outputs[0]["msg_type"] == "execute_result"  # displayed, so cached in Out[n]
    (model,) = inventory["models"]
    assert model["family"] == "ultralytics"
    assert model["className"] == "YOLO"
    assert model["module"].startswith("ultralytics.")
    assert model["label"] == "YOLO (yolov8n.yaml)"
    assert 3_000_000 < model["parameters"] < 3_300_000  # YOLOv8n: about 3.16 M
    assert set(model["bytes"]) == {"cpu"}
    # fp32 parameters plus BatchNorm buffers
    assert model["parameters"] * 4 <= model["bytes"]["cpu"] < model["parameters"] * 4 + MiB
    assert holder_names(model) == {"model", "_", f"_{n}", f"Out[{n}]"}
    assert model["stale"] is False

    second, inventory = run_and_inventory(kernel, comm, BUILD)
    m = second.execution_count
    older, newer = model_by_order(inventory)
    assert older["id"] == model["id"]
    assert older["family"] == newer["family"] == "ultralytics"
    assert older["stale"] is True and newer["stale"] is False
    assert holder_names(older) == {f"Out[{n}]", f"_{n}", "__"}
    assert {h["kind"] for h in older["holders"]} == {"output"}
    assert holder_names(newer) == {"model", "_", f"_{m}", f"Out[{m}]"}
    assert holder_names(newer, "variable") == {"model"}
    one = older["bytes"]["cpu"]
    assert newer["bytes"]["cpu"] == one

    clean = generate_clean_cell(inventory)
    assert f'me="_gpu_hygiene_clear_gpu", out_keys=({n},)):' in clean
    assert "still named, so kept: model." in clean
    n_cleaned = len(comm.messages("cleaned"))
    cleaned_cell, inventory = run_and_inventory(kernel, comm, clean)
    assert cleaned_cell.outputs == []
    cleaned = comm.wait_for("cleaned", n_cleaned + 1)[n_cleaned]
    assert cleaned["executionCount"] == cleaned_cell.execution_count
    assert cleaned["models"] == {"before": 2, "after": 1}
    assert cleaned["freed"] == {"cpu": one}
    assert cleaned["allocated"] is None and cleaned["reserved"] is None
    (survivor,) = inventory["models"]
    assert survivor["id"] == newer["id"]
    assert holder_names(survivor) == {"model", "_", f"_{m}", f"Out[{m}]"}
    state = kernel.evaluate(
        model="type(model).__name__",
        out="sorted(Out)",
        n_hidden=f"'_{n}' in get_ipython().user_ns_hidden or '_{n}' in get_ipython().user_ns",
        dunder="repr(__)",
        fn="'_gpu_hygiene_clear_gpu' in get_ipython().user_ns",
        live=(
            "sum(1 for o in __import__('gc').get_objects() if type(o).__name__ == 'DetectionModel')"
        ),
    )
    assert state == {
        "model": "YOLO",
        "out": [m],
        "n_hidden": False,
        "dunder": "''",
        "fn": False,
        "live": 1,
    }

    # safe to re-run: nothing left to free, nothing else touched
    again, inventory = run_and_inventory(kernel, comm, clean)
    assert again.outputs == []
    cleaned = comm.wait_for("cleaned", n_cleaned + 2)[n_cleaned + 1]
    assert cleaned["models"] == {"before": 1, "after": 1} and cleaned["freed"] == {}
    assert [x["id"] for x in inventory["models"]] == [newer["id"]]


def test_clean_cell_without_out_keys_clears_the_traceback_and_cycles(
    new_kernel, generate_clean_cell
):
    kernel, comm = start(new_kernel)
    setup = (
        "import gc, weakref, torch\n"
        "refs = []\n"
        "def make_cycle():\n"
        "    net = torch.nn.Sequential(torch.nn.Linear(64, 64))\n"
        "    net.loop = {'me': net}   # a reference cycle, then no name reaches it\n"
        "    refs.append(weakref.ref(net))\n"
        "def fail():\n"
        "    act = torch.ones(2 ** 20, dtype=torch.uint8)\n"
        "    refs.append(weakref.ref(act))\n"
        "    raise MemoryError('simulated')\n"
        "gc.disable()\n"
        "make_cycle()"
    )
    _, inventory = run_and_inventory(kernel, comm, setup)
    (hidden,) = inventory["models"]
    assert hidden["className"] == "Sequential" and hidden["family"] == "torch"
    unreachable = "unreachable from the namespace"
    assert hidden["holders"] == [{"kind": "hidden", "name": unreachable, "path": unreachable}]
    assert hidden["stale"] is True
    assert hidden["parameters"] == 64 * 64 + 64

    failed = kernel.run("fail()")
    assert failed.error["ename"] == "MemoryError"
    inventory = comm.wait_for("inventory", len(comm.messages("inventory")))[-1]
    last = inventory["lastError"]
    assert last["type"] == "MemoryError" and last["message"] == "simulated"
    frames = {f["name"]: f for f in last["frames"]}
    assert frames["fail"]["bytes"] == {"cpu": 2**20} and frames["fail"]["tensors"] == 1
    assert last["bytes"] == {"cpu": 2**20}

    n_cleaned = len(comm.messages("cleaned"))
    clean = generate_clean_cell(inventory)
    assert "out_keys=()" in clean
    cell, inventory = run_and_inventory(kernel, comm, clean)
    assert cell.outputs == []
    assert inventory["models"] == [] and inventory["lastError"] is None
    cleaned = comm.wait_for("cleaned", n_cleaned + 1)[n_cleaned]
    assert cleaned["models"] == {"before": 1, "after": 0}
    assert cleaned["freed"] == {"cpu": (64 * 64 + 64) * 4}
    check = kernel.run("gc.enable()\nprint([r() is None for r in refs])")
    assert check.stdout == "[True, True]\n"


@ultralytics_flops_copy()
def test_models_reached_through_containers_closures_and_submodules(new_kernel):
    kernel, comm = start(new_kernel)
    run_and_inventory(kernel, comm, "import torch\nfrom ultralytics import YOLO")
    code = (
        "yolo = YOLO('yolov8n.yaml')\n"
        "head = yolo.model.model[-1]            # a submodule: held for its top-level owner\n"
        "bag = {'nets': [torch.nn.Linear(8, 8)]}\n"
        "def make():\n"
        "    conv = torch.nn.Conv2d(3, 4, 3)\n"
        "    return lambda: conv\n"
        "get_conv = make()\n"
        "plain = torch.nn.ReLU()                # no parameters: not a model\n"
        "t = torch.zeros(3)"
    )
    _, inventory = run_and_inventory(kernel, comm, code)
    by_class = {m["className"]: m for m in inventory["models"]}
    assert set(by_class) == {"YOLO", "Linear", "Conv2d"}
    assert holder_names(by_class["YOLO"]) == {"yolo", "head"}
    assert holder_names(by_class["Linear"]) == {"bag"}
    assert holder_names(by_class["Conv2d"]) == {"get_conv"}
    assert all(not m["stale"] for m in inventory["models"])
    orders = [by_class[c]["order"] for c in ("YOLO", "Linear", "Conv2d")]
    assert orders == sorted(orders)
    assert kernel.evaluate(n="len(Out)") == {"n": 0}


@kernel_needs("ultralytics")
@ultralytics_flops_copy()
def test_clean_cell_frees_an_unnamed_cyclic_output_of_the_previous_cell(
    new_kernel, generate_clean_cell
):
    # While a cell runs, IPython's last_execution_result is still the *previous* cell's result,
    # whose .result is the displayed object. Without dropping it, gc.collect() in the clean cell
    # cannot collect a model caught in a reference cycle (it stays until some later gc run).
    kernel, comm = start(new_kernel)
    kernel.run("import weakref\nfrom ultralytics import YOLO\nrefs = []")
    kernel.run(
        "def build():\n"
        "    m = YOLO('yolov8n.yaml')\n"
        "    m.model.cycle = {'owner': m}\n"
        "    refs.append(weakref.ref(m))\n"
        "    return m"
    )
    shown, inventory = run_and_inventory(kernel, comm, "build()")
    n = shown.execution_count
    (model,) = inventory["models"]
    assert model["stale"] is True
    assert holder_names(model) == {"_", f"_{n}", f"Out[{n}]"}
    n_cleaned = len(comm.messages("cleaned"))
    clean = generate_clean_cell(inventory)
    assert f"out_keys=({n},)" in clean
    _, inventory = run_and_inventory(kernel, comm, clean)
    assert inventory["models"] == []
    cleaned = comm.wait_for("cleaned", n_cleaned + 1)[n_cleaned]
    assert cleaned["models"] == {"before": 1, "after": 0}
    assert cleaned["freed"] == model["bytes"]
    assert kernel.run("print(refs[0]() is None)").stdout == "True\n"


@ultralytics_flops_copy()
def test_a_copy_hanging_off_a_model_is_found_and_listed_as_its_part(new_kernel):
    # deepcopy (ultralytics' EMA) and unpickling build modules without the registration hooks;
    # the walk finds them, also through a model's plain attributes (a trainer object here),
    # and reports them as parts of that model, with their own bytes.
    kernel, comm = start(new_kernel)
    run_and_inventory(kernel, comm, "import copy\nfrom ultralytics import YOLO")
    code = (
        "class Trainer:\n"
        "    pass\n"
        "model = YOLO('yolov8n.yaml')\n"
        "model.trainer = Trainer()\n"
        "model.trainer.ema = copy.deepcopy(model.model).half()"
    )
    _, inventory = run_and_inventory(kernel, comm, code)
    (wrapper,) = inventory["models"]
    assert wrapper["className"] == "YOLO"
    assert holder_names(wrapper) == {"model"}
    (ema,) = wrapper["parts"]
    assert (ema["path"], ema["kind"]) == ("trainer.ema", "model")
    assert ema["className"] == "DetectionModel"
    assert abs(ema["bytes"]["cpu"] * 2 - wrapper["bytes"]["cpu"]) < MiB  # fp16 copy
    _, inventory = run_and_inventory(kernel, comm, "del model")
    assert inventory["models"] == []


def test_the_agent_never_asks_the_gc_for_a_modules_referents(new_kernel):
    # gc.get_referents(<_asyncio module>) corrupts _asyncio's free list on CPython 3.12 before
    # 3.12.6 and the next collection never ends (python/cpython#122695): it hung kernels on the
    # GPU machine in their first `import torch`. Python 3.11 here does not hang, so the calls
    # are recorded instead.
    kernel = new_kernel()
    recorder = (
        "import gc, sys, types\n"
        "def install():\n"
        "    original = gc.get_referents\n"
        "    seen = sys._gpu_hygiene_test_modules = []\n"
        "    def recording(*objs):\n"
        "        seen.extend(o.__name__ for o in objs if isinstance(o, types.ModuleType))\n"
        "        return original(*objs)\n"
        "    gc.get_referents = recording\n"
        "install()\n"
        "del install"
    )
    assert kernel.execute(recorder, silent=True, store_history=False).error is None
    kernel.inject({"sampleIntervalMs": 250})
    comm = kernel.open_comm(250)
    run_and_inventory(kernel, comm, "import torch\nnet = torch.nn.Linear(4, 4)\nfail = [net]")
    kernel.run("def f(x):\n    raise ValueError(x)\nf(net)")
    comm.request_inventory()
    seen = kernel.evaluate(seen="__import__('sys')._gpu_hygiene_test_modules")["seen"]
    assert seen == []
