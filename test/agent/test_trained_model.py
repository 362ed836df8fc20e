"""After a finished Ultralytics training (issue 17, items 1 and 4), in a real kernel with real
torch and Ultralytics on the CPU: what the inventory says while a user goes on working
(``results = model.train(...)``, a prediction, a validation, a name on the EMA copy, a loop over
the model's layers, a second training), written as the fixture
``test/fixtures/inventory_after_training.json`` that the browser's rules read in jest
(``test/unit/findings/after-training.spec.ts``). The fixture is regenerated here on every run
and compared with the committed one; ``UPDATE_FIXTURES=1`` rewrites it after a deliberate
change."""

import json
import os
from pathlib import Path

import pytest
from checks import make_dataset

pytestmark = pytest.mark.timeout(400)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "inventory_after_training.json"

# what the fixture keeps of an inventory: the facts the rules read, without times and ids
KEPT = ("executionCount", "truncated", "models", "roots", "tensors", "graphs", "unattributed")


def train_code(data, runs, name="t"):
    return (
        f"model.train(data={str(data)!r}, epochs=1, imgsz=64, batch=2, workers=0, "
        f"device='cpu', plots=False, amp=False, save=False, project={str(runs)!r}, "
        f"name={name!r}, exist_ok=True, verbose=False)"
    )


def scenario_cells(data, runs):
    """(step, code): the cells a user runs after building a model, in order."""
    image = "img = (np.random.default_rng(0).random((64, 64, 3)) * 255).astype('uint8')"
    return [
        ("built", "from ultralytics import YOLO\nimport numpy as np\nmodel = YOLO('yolov8n.yaml')"),
        ("trained, result displayed", train_code(data, runs)),
        ("trained again, results named", "results = " + train_code(data, runs)),
        ("predicted", f"{image}\npred = model.predict(img, verbose=False)"),
        ("a name on the EMA copy", "ema = model.trainer.ema.ema"),
        ("a list of the layers", "del ema\nlayers = list(model.model.modules())"),
        ("a loop over the layers", "del layers\nfor m in model.model.modules():\n    pass"),
        ("a name on the trainer", "del m\ntrainer = model.trainer"),
        ("a second YOLO", "del trainer\nother = YOLO('yolov8n.yaml')"),
    ]


def normalise(inventories):
    """The inventories with ids renumbered (``m1``, ``m2``… in order of first appearance) and
    only the ``KEPT`` keys: stable from one run to the next."""
    ids = {}

    def rename(value):
        if isinstance(value, dict):
            return {
                k: (ids.setdefault(v, f"m{len(ids) + 1}") if k == "id" else rename(v))
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [rename(v) for v in value]
        return value

    return [
        {"step": step, **rename({k: inventory[k] for k in KEPT})} for step, inventory in inventories
    ]


def test_inventory_after_a_finished_training_is_the_committed_fixture(new_kernel, tmp_path):
    data = make_dataset(tmp_path / "data", n_train=4, n_val=2, size=64)
    kernel = new_kernel(env={"YOLO_OFFLINE": "true", "CUDA_VISIBLE_DEVICES": ""})
    kernel.inject({"sampleIntervalMs": 1000})
    comm = kernel.open_comm(1000)
    inventories = []
    for step, code in scenario_cells(data, tmp_path / "runs"):
        n = len(comm.messages("inventory"))
        result = kernel.run(code, timeout=200)
        assert result.error is None, (step, result.error)
        inventories.append((step, comm.wait_for("inventory", n + 1, timeout=60)[n]))
    steps = normalise(inventories)
    text = json.dumps(steps, indent=1, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_FIXTURES"):
        FIXTURE.write_text(text, encoding="utf-8")
    assert FIXTURE.exists(), f"run with UPDATE_FIXTURES=1 to write {FIXTURE}"
    committed = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert [s["step"] for s in steps] == [s["step"] for s in committed]
    for fresh, old in zip(steps, committed):
        assert fresh == old, fresh["step"]
