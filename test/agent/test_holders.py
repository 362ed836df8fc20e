"""Issue 3's answers in a real kernel with real torch and Ultralytics (CPU): holder paths, a
trained model's parts, bytes per root, loose tensors, the out-of-memory diagnosis and the
skipped inventory."""

import pytest
from checks import make_dataset  # the GPU check's tiny offline dataset
from conftest import model_by_order, ultralytics_flops_copy
from test_trained_model import FIXTURES, check_fixture

# compat: version-sensitive, in the subset `make test-compat-oldest` runs (scripts/compat.py)
pytestmark = [pytest.mark.timeout(240), pytest.mark.compat]

MiB = 2**20
# what test/unit/findings/ema-copy.spec.ts reads of the EMA-copy inventories
EMA_KEYS = ("models", "roots", "graphs", "owners", "keptErrors", "optimizers")


def start(new_kernel):
    kernel = new_kernel(env={"YOLO_OFFLINE": "true"})
    kernel.inject({"sampleIntervalMs": 1000})
    comm = kernel.open_comm(1000)
    return kernel, comm


def cell(kernel, comm, code, error=False, timeout=120):
    """Run a user cell; return the inventory sent after it."""
    n = len(comm.messages("inventory"))
    result = kernel.run(code, timeout=timeout)
    assert (result.error is not None) == error, result.error
    inventory = comm.wait_for("inventory", n + 1, timeout=60)[n]
    assert inventory["executionCount"] == result.execution_count
    return inventory


def paths(model, kind=None):
    return {h["path"] for h in model["holders"] if kind is None or h["kind"] == kind}


def total(by_device):
    return sum(by_device.values())


@ultralytics_flops_copy()
def test_a_trained_model_shows_its_trainer_ema_and_optimizer_as_parts(new_kernel, tmp_path):
    data = make_dataset(tmp_path / "data", n_train=4, n_val=2, size=64)
    kernel, comm = start(new_kernel)
    inventory = cell(kernel, comm, "from ultralytics import YOLO\nmodel = YOLO('yolov8n.yaml')")
    (fresh,) = inventory["models"]
    one = fresh["bytes"]["cpu"]
    assert fresh["parts"] == []
    inventory = cell(
        kernel,
        comm,
        f"results = model.train(data={str(data)!r}, epochs=1, imgsz=64, batch=2, workers=0, "
        f"device='cpu', plots=False, val=False, project={str(tmp_path / 'runs')!r}, "
        "name='t', exist_ok=True, verbose=False)",
        timeout=200,
    )
    (model,) = inventory["models"]  # the trainer's models are parts, not models of their own
    assert model["id"] == fresh["id"] and paths(model) == {"model"}
    parts = {p["path"]: p for p in model["parts"]}
    assert parts["trainer.ema.ema"]["kind"] == "model"
    assert parts["trainer.ema.ema"]["className"] == "DetectionModel"
    assert abs(total(parts["trainer.ema.ema"]["bytes"]) - one) < MiB
    optimizer = parts["trainer.optimizer"]
    assert optimizer["kind"] == "optimizer"
    # the optimizer's state: two moments (AdamW) or one momentum buffer (SGD) per parameter,
    # fp32; the parameters themselves are the model's bytes, not counted again
    moments = 2 if optimizer["className"] in ("Adam", "AdamW") else 1
    assert abs(total(optimizer["bytes"]) - moments * model["parameters"] * 4) < MiB
    (root,) = [r for r in inventory["roots"] if r["name"] == "model"]
    assert root["models"] == 1
    listed = total(model["bytes"]) + sum(total(p["bytes"]) for p in model["parts"])
    # tensor parts below 1 MiB (a stride, a loss's constants) count in the root, unlisted
    assert 0 <= total(root["bytes"]) - listed < MiB

    # a name that reaches the EMA copy directly is a holder of that part, not a second model
    inventory = cell(kernel, comm, "ema = model.trainer.ema.ema")
    (wrapper,) = model_by_order(inventory)
    parts = {p["path"]: p for p in wrapper["parts"]}
    assert parts["trainer.ema.ema"]["holders"] == [
        {"kind": "variable", "name": "ema", "path": "ema"}
    ]
    assert "holders" not in parts["trainer.optimizer"]

    # issue 28, item 4: a loop variable that still names the EMA copy once the trainer is gone
    # keeps a copy (made by deepcopy: ``copied``), never a newer instance of model
    inventory = cell(
        kernel,
        comm,
        "for m in [model.trainer.ema.ema]:\n    n = sum(p.numel() for p in m.parameters())\n"
        "del ema\nmodel.trainer = None",
    )
    ema_copy = [("m holds the EMA after trainer = None", inventory)]
    wrapper, *rest = model_by_order(inventory)
    assert wrapper["id"] == fresh["id"] and wrapper["parts"] == []
    (kept,) = [m for m in rest if paths(m) == {"m"}]
    assert kept["className"] == "DetectionModel" and kept["copied"] is True
    assert kept["stale"] is False and abs(total(kept["bytes"]) - one) < MiB
    # the trainer's reference cycles keep its other models until a collection: nothing
    # reaches them
    for other in rest:
        if other is not kept:
            assert paths(other) == {"unreachable from the namespace"} and other["stale"] is True
    inventory = cell(kernel, comm, "import gc\ngc.collect()")
    assert [m["id"] for m in inventory["models"]] == [fresh["id"], kept["id"]]
    ema_copy.append(("collected", inventory))
    check_fixture(FIXTURES / "inventory_ema_copy.json", ema_copy, EMA_KEYS)
    inventory = cell(kernel, comm, "del m")
    assert [m["id"] for m in inventory["models"]] == [fresh["id"]]


def test_holder_paths_through_containers_objects_and_closures(new_kernel):
    kernel, comm = start(new_kernel)
    cell(kernel, comm, "import torch")
    inventory = cell(
        kernel,
        comm,
        "class Box:\n"
        "    pass\n"
        "net = torch.nn.Linear(256, 256)\n"
        "runs = {'a': [None, net]}\n"
        "box = Box()\n"
        "box.inner = {'net': net}\n"
        "def make():\n"
        "    kept = net\n"
        "    return lambda: kept\n"
        "fn = make()\n"
        "class Slotted:\n"
        "    __slots__ = ('unset', 'net')\n"
        "    def __getattribute__(self, name):\n"
        "        raise RuntimeError('the agent ran user code')\n"
        "slots = Slotted()\n"
        "object.__setattr__(slots, 'net', net)\n",
    )
    (net,) = inventory["models"]
    # a __slots__ attribute is named, read through its member descriptor (no user code)
    assert paths(net) == {
        "net",
        "runs['a'][1]",
        "box.inner['net']",
        "fn<closure>",
        "slots.net",
    }
    inventory = cell(kernel, comm, "del net, runs, box, slots")
    (net,) = inventory["models"]
    assert paths(net) == {"fn<closure>"} and net["stale"] is False


def test_roots_count_each_storage_once_and_name_the_largest_tensors(new_kernel):
    kernel, comm = start(new_kernel)
    cell(kernel, comm, "import torch")
    inventory = cell(
        kernel,
        comm,
        "blob = torch.zeros(4 * 2 ** 20, dtype=torch.uint8)\n"
        "view = blob[:10]            # shares blob's storage\n"
        "small = torch.ones(10)\n"
        "batch = {'x': torch.zeros(2, 3, 256, 256)}\n"
        "net = torch.nn.Linear(512, 512)\n",
    )
    roots = {r["name"]: r for r in inventory["roots"]}
    assert roots["blob"]["bytes"] == {"cpu": 4 * MiB} and roots["blob"]["tensors"] == 1
    # view's storage is blob's: counted once (under blob), shared by both
    assert roots["view"]["bytes"] == {} and roots["view"]["sole"] == {}
    assert roots["view"]["shared"] == roots["blob"]["shared"] == {"cpu": 4 * MiB}
    assert roots["view"]["sharedWith"] == ["blob"] and roots["blob"]["sole"] == {}
    assert roots["small"]["bytes"] == {"cpu": 40}
    assert roots["batch"]["bytes"] == {"cpu": 2 * 3 * 256 * 256 * 4}
    assert roots["net"]["bytes"] == {"cpu": (512 * 512 + 512) * 4} and roots["net"]["models"] == 1
    assert [(t["path"], t["bytes"], t["shape"], t["dtype"]) for t in inventory["tensors"]] == [
        ("blob", 4 * MiB, [4 * MiB], "uint8"),
        ("batch['x']", 2 * 3 * 256 * 256 * 4, [2, 3, 256, 256], "float32"),
    ]
    assert inventory["unattributed"] == {}  # CUDA only


OOM_NEW = (
    "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.19 GiB "
    "of which 3.19 MiB is free. Process 4242 has 79.18 GiB memory in use. Of the allocated "
    "memory 78.50 GiB is allocated by PyTorch, and 123.00 MiB is reserved by PyTorch but "
    "unallocated."
)
OOM_OLD = (
    "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 15.78 GiB total capacity; "
    "14.56 GiB already allocated; 3.19 MiB free; 14.60 GiB reserved in total by PyTorch)"
)


@ultralytics_flops_copy()
def test_an_out_of_memory_error_gets_a_diagnosis(new_kernel):
    # No GPU here: the cell raises torch's own OutOfMemoryError with the message torch >= 2.1
    # writes (and RuntimeError with the 1.x wording); what the agent parses and reports is real.
    kernel, comm = start(new_kernel)
    cell(kernel, comm, "import torch\nfrom ultralytics import YOLO")
    cell(kernel, comm, "YOLO('yolov8n.yaml')")  # displayed: held only by Out
    cell(kernel, comm, f"raise torch.OutOfMemoryError({OOM_NEW!r})", error=True)
    (oom,) = comm.wait_for("oom", 1, timeout=30)
    assert oom["errorType"] == "OutOfMemoryError"
    assert oom["message"].startswith("CUDA out of memory. Tried to allocate 20.00 MiB.")
    assert oom["device"] == "cuda:0"
    assert (oom["requested"], oom["free"], oom["total"]) == (
        20 * MiB,
        int(3.19 * MiB),
        int(79.19 * 2**30),
    )
    assert oom["process"] is None and oom["processes"] == []  # no NVML here
    assert oom["allocated"] is None and oom["reserved"] is None
    (stale,) = oom["stale"]
    assert stale["label"] == "YOLO (yolov8n.yaml)" and stale["bytes"] == 0  # on cuda:0
    assert oom["traceback"] == 0 and oom["graphs"] == 0
    assert oom["torch"] and oom["ultralytics"]

    cell(kernel, comm, f"raise RuntimeError({OOM_OLD!r})", error=True)
    oom = comm.wait_for("oom", 2, timeout=30)[1]
    assert (oom["errorType"], oom["device"]) == ("RuntimeError", "cuda:1")
    assert (oom["requested"], oom["free"]) == (2 * 2**30, int(3.19 * MiB))
    assert oom["total"] == int(15.78 * 2**30)

    cell(kernel, comm, "raise MemoryError('host RAM, not CUDA')", error=True)
    cell(kernel, comm, "1 / 0", error=True)
    assert len(comm.messages("oom")) == 2


def test_an_inventory_is_skipped_when_nothing_it_depends_on_changed(new_kernel):
    kernel, comm = start(new_kernel)
    full = cell(kernel, comm, "import torch\nnet = torch.nn.Linear(8, 8)\nkeep = []\ncounter = 0")
    assert full["skipped"] is False
    skipped = cell(kernel, comm, "counter += 1")  # an int: holds nothing
    assert skipped["skipped"] is True
    assert skipped["models"] == full["models"] and skipped["roots"] == full["roots"]
    assert skipped["seq"] > full["seq"]
    # each of these changes what holds the model: never skipped
    for code in ("keep.append(net)", "del net", "keep.clear()"):
        inventory = cell(kernel, comm, code)
        assert inventory["skipped"] is False, code
    assert inventory["models"] == []
    # an explicit request always walks
    comm.request_inventory()
    assert comm.messages("inventory")[-1]["skipped"] is False


def test_model_bytes_follow_changes_the_cache_must_not_hide(new_kernel):
    # The agent keeps each model's measurement between inventories while nothing it read
    # changed; each of these changes must show in the next inventory.
    kernel, comm = start(new_kernel)
    one = (256 * 256 + 256) * 4  # a Linear(256, 256) in fp32
    build = "import torch\nnet = torch.nn.Sequential(torch.nn.Linear(256, 256))"
    inventory = cell(kernel, comm, build)
    assert inventory["models"][0]["bytes"] == {"cpu": one}
    inventory = cell(kernel, comm, "tmp = object()")  # a full inventory, nothing changed
    assert inventory["skipped"] is False and inventory["models"][0]["bytes"] == {"cpu": one}
    # gradients appear (backward: no registration event, new storages)
    inventory = cell(kernel, comm, "net(torch.ones(1, 256)).sum().backward()")
    assert inventory["models"][0]["bytes"] == {"cpu": 2 * one}
    # .half() moves every parameter and gradient to new fp16 storages
    inventory = cell(kernel, comm, "net.half()\ntmp = object()")
    assert inventory["models"][0]["bytes"] == {"cpu": one}
    # a submodule registered later
    inventory = cell(kernel, comm, "net.append(torch.nn.Linear(256, 256))")
    assert inventory["models"][0]["bytes"] == {"cpu": one + one}
    inventory = cell(kernel, comm, "net.zero_grad(set_to_none=True)\ntmp = object()")
    assert inventory["models"][0]["bytes"] == {"cpu": one // 2 + one}
