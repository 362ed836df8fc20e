"""Owner objects of the trainer libraries, in a real kernel on the CPU: a Hugging Face
``transformers.Trainer`` (a tiny BERT built from a config, a list of in-memory examples) and a
Lightning ``Trainer`` (a tiny ``LightningModule``), each after a two-step training. Nothing is
downloaded: the models are built from code, the data is made in the cell, the hub is offline.

What is checked, per library: the trainer is an owner object (``owners``) with its model and
its optimizer state at the paths the library keeps them (``trainer.optimizer``; Lightning's
``trainer._accelerator_connector._strategy_flag._optimizers[0]``, three hops below the
trainer); what the browser offers (``src/analysis/findings/owner-object.ts``, run by jest over
the fixtures written here) frees what it says: the cells the browser generates are run, and
the bytes of every tensor storage alive in the kernel (``LIVE``: ``gc.get_objects()``, with
gradients) are compared before and after.

Tolerance: none. On the CPU nothing else allocates tensors between the two counts (no
allocator cache, no CUDA context), and the agent's figures are whole storages as torch reports
them, so what the fix frees must equal the finding's bytes exactly.

The inventories are written as ``test/fixtures/inventory_hf_trainer.json`` and
``inventory_lightning_trainer.json`` (``UPDATE_FIXTURES=1`` rewrites them) and compared with
the committed ones only under the library versions they were recorded with (``PINNED``): paths
and bytes are the library's internals. Skipped where the library is not importable in the
kernel (the kernel's own interpreter is asked where ``GPU_HYGIENE_KERNEL`` names a ``make
compat`` kernel; else this process's environment, which the kernel gets, ``PYTHONPATH``
included). The libraries are looked up, not imported, here: this process never imports torch."""

import pytest
from checks import LIVE
from kernel_driver import kernel_needs, kernel_version
from test_trained_model import FIXTURES, check_fixture, total

# compat: version-sensitive, in the subset `make test-compat-oldest` runs (scripts/compat.py)
pytestmark = [pytest.mark.timeout(300), pytest.mark.compat]

OFFLINE = {
    "CUDA_VISIBLE_DEVICES": "",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def needs(*names):
    """Skip (before the fixtures compile anything) where one of ``names`` is not importable in
    the kernel's environment (``kernel_driver.kernel_needs``: a ``make compat`` kernel is asked
    with its own interpreter)."""
    return kernel_needs(*names)


class Session:
    """One kernel with the agent, its comm, and the inventories of the cells run, by step."""

    def __init__(self, new_kernel):
        self.kernel = new_kernel(env=OFFLINE)
        self.kernel.inject({"sampleIntervalMs": 1000})
        self.comm = self.kernel.open_comm(1000)
        self.steps = []

    def cell(self, step, code):
        n = len(self.comm.messages("inventory"))
        result = self.kernel.run(code, timeout=200)
        assert result.error is None, (step, result.error)
        inventory = self.comm.wait_for("inventory", n + 1, timeout=60)[n]
        self.steps.append((step, inventory))
        return inventory

    def live(self):
        return self.kernel.evaluate(b=LIVE)["b"]

    def versions(self, *names):
        expr = "{" + ", ".join(f"{n!r}: __import__({n!r}).__version__" for n in names) + "}"
        return self.kernel.evaluate(v=expr)["v"]


def owner_of(inventory, name="trainer"):
    (owner,) = [o for o in inventory["owners"] if o["name"] == name]
    return owner


def root_of(inventory, name):
    (root,) = [r for r in inventory["roots"] if r["kind"] == "variable" and r["name"] == name]
    return root


def only_model(inventory):
    (model,) = inventory["models"]
    return model


def compare_fixture(session, path, pinned):
    versions = session.versions(*pinned)
    if versions != pinned:
        pytest.skip(f"facts checked; the fixture is compared under {pinned} only, not {versions}")
    check_fixture(path, session.steps)


# --------------------------------------------------------------------------------------------
# Hugging Face transformers.Trainer

# the trainer's path to its model: transformers 4.46 sets trainer.model_wrapped (the same model
# until training wraps it) before trainer.model, and the walk names the first path it meets
MODEL_PATH = (
    "trainer.model_wrapped"
    if (kernel_version("transformers") or (99,)) < (4, 47)
    else "trainer.model"
)
# transformers 5 keeps the running loss on the trainer (``Trainer._tr_loss``, a tensor the
# trainer alone holds); 4.x keeps it in a local of the training loop, gone when it returns
TR_LOSS = [("trainer._tr_loss", "tensor")] if (kernel_version("transformers") or ()) >= (5,) else []
HF_PINNED = {"torch": "2.14.1+cu130", "transformers": "5.24.0", "accelerate": "1.15.0"}

HF_BUILD = """\
import tempfile
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

torch.manual_seed(0)
config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, vocab_size=100)
model = BertForSequenceClassification(config)
data = [{"input_ids": torch.randint(0, 100, (16,)), "labels": torch.tensor(i % 2)}
        for i in range(8)]
args = TrainingArguments(output_dir=tempfile.mkdtemp(), use_cpu=True, report_to=[], max_steps=2,
                         save_strategy="no", per_device_train_batch_size=4, disable_tqdm=True)
trainer = Trainer(model=model, args=args, train_dataset=data)
"""


@needs("transformers", "accelerate")
def test_hugging_face_trainer_is_an_owner_and_its_fixes_free_what_they_say(
    new_kernel, browser_cells, generate_clean_cell
):
    s = Session(new_kernel)
    built = s.cell("built", HF_BUILD)
    # before training: the trainer holds the model and the data, both named by other variables
    assert [h["path"] for h in owner_of(built)["holds"]] == [
        MODEL_PATH,
        "trainer.train_dataset",
    ]
    assert root_of(built, "trainer")["sole"] == {}

    trained = s.cell("trained", "trainer.train()")
    owner = owner_of(trained)
    holds = {h["path"]: h for h in owner["holds"]}
    assert owner["className"] == "Trainer"
    assert [(h["path"], h["kind"]) for h in owner["holds"]] == [
        (MODEL_PATH, "model"),
        ("trainer.optimizer", "optimizer"),
        *TR_LOSS,
        ("trainer.train_dataset", "tensor"),  # found two hops further: after the others
    ]  # model_wrapped, accelerator._models, callback_handler.model: the same model, once
    model = only_model(trained)
    assert holds[MODEL_PATH]["id"] == model["id"]
    assert holds[MODEL_PATH]["bytes"] == model["bytes"]  # HF sets the gradients to None
    params = 37922 * 4
    assert holds[MODEL_PATH]["parameters"] == 37922 and holds[MODEL_PATH]["grads"] == {}
    # AdamW's two moments of every parameter and one 4-byte step per parameter tensor; the
    # accelerate wrapper (AcceleratedOptimizer) shares its inner optimizer's state
    assert holds["trainer.optimizer"]["className"] == "AcceleratedOptimizer"
    steps = total(holds["trainer.optimizer"]["bytes"]) - 2 * params
    assert 0 < steps <= 4 * 200 and steps % 4 == 0
    assert holds["trainer.train_dataset"]["bytes"] == {"cpu": 8 * (16 * 8 + 8)}  # data's tensors
    assert [h["name"] for h in model["holders"]] == ["model", "trainer"]
    # the trainer alone keeps its optimizer state and loss: what `del trainer` frees
    trainer_root = root_of(trained, "trainer")
    freed = total(trainer_root["sole"])
    assert freed == total(holds["trainer.optimizer"]["bytes"]) + sum(
        total(holds[path]["bytes"]) for path, _ in TR_LOSS
    )
    assert trainer_root["sharedWith"] == ["data", "model"]

    # the browser's fix, "Delete trainer…" of the variable (the model stays): its cell
    before = s.live()
    delete = browser_cells(
        "tensor-cells", "generateDeleteVariableCell", "trainer", trainer_root["sole"]
    )
    after = s.cell("trainer deleted, model kept", delete)
    assert before - s.live() == freed
    assert after["owners"] == [] and only_model(after)["id"] == model["id"]

    # a second training, then only the trainer names the model: "Delete trainer…" frees both
    s.cell(
        "trained again",
        "trainer = Trainer(model=model, args=args, train_dataset=data)\ntrainer.train()",
    )
    alone = s.cell("model deleted", "del model")
    owner = owner_of(alone)
    held = sum(total(h["bytes"]) for h in owner["holds"])
    trainer_root = root_of(alone, "trainer")
    # what only the trainer reaches: all it holds but the data, which `data` names too
    assert total(trainer_root["sole"]) == held - total({"cpu": 8 * (16 * 8 + 8)})
    before = s.live()
    code = generate_clean_cell(alone, modelId=model["id"], deleteNames=["trainer"])
    gone = s.cell("trainer deleted", code)
    assert before - s.live() == total(trainer_root["sole"])
    assert gone["models"] == [] and gone["owners"] == []

    compare_fixture(s, FIXTURES / "inventory_hf_trainer.json", HF_PINNED)


# --------------------------------------------------------------------------------------------
# Lightning Trainer

PL_PINNED = {"torch": "2.14.1+cu130", "lightning": "2.6.6"}

PL_BUILD = """\
import torch
import lightning as L

torch.manual_seed(0)


class Classifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                       torch.nn.Linear(64, 2))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters())


x, y = torch.randn(32, 64), torch.randint(0, 2, (32,))
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
module = Classifier()
trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False)
"""


@needs("lightning")
def test_lightning_trainer_is_an_owner_and_its_fix_frees_what_it_says(
    new_kernel, generate_clean_cell
):
    s = Session(new_kernel)
    built = s.cell("built", PL_BUILD)
    assert built["owners"] == []  # the trainer holds no model before fit()

    trained = s.cell("trained", "trainer.fit(module, loader)")
    owner = owner_of(trained)
    assert owner["className"] == "Trainer"
    # Lightning keeps both below the trainer's own attributes, in its strategy
    assert [(h["path"], h["kind"], h["className"]) for h in owner["holds"]] == [
        ("trainer._data_connector._datahook_selector.model", "model", "Classifier"),
        ("trainer._accelerator_connector._strategy_flag._optimizers[0]", "optimizer", "AdamW"),
    ]
    model_hold, optimizer = owner["holds"]
    model = only_model(trained)
    params = (64 * 64 + 64 + 64 * 2 + 2) * 4
    assert model_hold["id"] == model["id"] and model_hold["parameters"] == params // 4
    # Lightning leaves the last step's gradients on the parameters
    assert model_hold["bytes"] == {"cpu": 2 * params} and model_hold["grads"] == {"cpu": params}
    assert 2 * params < total(optimizer["bytes"]) <= 2 * params + 4 * 4  # moments, 4 steps
    # the module holds its trainer (module._trainer): deleting trainer alone frees nothing
    trainer_root = root_of(trained, "trainer")
    assert trainer_root["sole"] == {} and "module" in trainer_root["sharedWith"]
    assert [p["path"].split(".")[0] for p in model["parts"]] == ["_trainer"]
    before = s.live()
    s.cell("trainer deleted", "del trainer")
    assert before - s.live() == 0
    s.cell("trainer named again", "trainer = module.trainer")

    alone = s.cell("module deleted", "del module")
    owner = owner_of(alone)
    held = sum(total(h["bytes"]) for h in owner["holds"])
    trainer_root = root_of(alone, "trainer")
    assert total(trainer_root["sole"]) == held == 2 * params + total(optimizer["bytes"])
    before = s.live()
    code = generate_clean_cell(alone, modelId=model["id"], deleteNames=["trainer"])
    gone = s.cell("trainer and module deleted", code)
    assert before - s.live() == held
    assert gone["models"] == [] and gone["owners"] == []
    assert total(root_of(gone, "loader")["shared"]) == 32 * 64 * 4 + 32 * 8  # x, y stay

    compare_fixture(s, FIXTURES / "inventory_lightning_trainer.json", PL_PINNED)
