"""Issue 23, items 1, 2 and 5, in a real kernel on both devices: the holders of a plain PyTorch
or transformers notebook that no model shows.

- An optimizer whose model was deleted (``del model``, ``gc.collect()``) keeps every parameter,
  its gradient and the AdamW moments (``optimizers``; of a live model, the moments only);
  its LR scheduler keeps the optimizer (``referencedBy``). The browser's **Delete opt,
  sched…** cell frees the finding's bytes.
- A caught exception kept in a variable (``err = e``; a retry loop's list of errors) keeps the
  frames of the failed call and their locals through ``err.__traceback__`` (``keptErrors``:
  ``err → step → acts``). Clean GPU clears those frames (the exception stays); **Delete
  errors…** frees the list's.
- No false alarm: one model under several names (``.to(dtype)`` returns the same object, a
  ``torch.compile`` wrapper), tied embeddings, an exception that keeps no tensor: one model,
  its bytes once, nothing stranded, no kept error. Deliberate copies (``copy.deepcopy``: an
  EMA, a best checkpoint) are separate instances marked ``copied`` (never a stack).

The truth: on the CPU the bytes of every tensor storage alive in the kernel (``LIVE``: every
tensor ``gc`` tracks, with gradients) before and after, which must move by exactly the finding's
bytes; on CUDA ``torch.cuda.memory_allocated()``, within 1 MiB. The cells run are the very ones
the browser generates (``src/analysis/codegen/*.ts`` through node). The inventories (CPU) are
the fixtures ``test/fixtures/inventory_<test>.json`` that the rules' jest spec
(``test/unit/findings/llm-holders.spec.ts``) reads, compared with the committed ones
(``UPDATE_FIXTURES=1`` rewrites them).
"""

import pytest
from checks import LIVE, MiB, within
from conftest import DEVICES
from test_trained_model import FIXTURES, check_fixture

pytestmark = [pytest.mark.timeout(300), pytest.mark.compat]

on_both = pytest.mark.parametrize("device", DEVICES)
KEYS = ("models", "roots", "graphs", "owners", "keptErrors", "optimizers")

SETUP = "import gc, weakref, torch\nDEV = {dev!r}\ntorch.manual_seed(0)"

NET = "torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.Linear(512, 512)).to(DEV)"

# one parameter set: 2 x (512 x 512 + 512) float32
PARAMS = 2 * (512 * 512 + 512) * 4
LM_BYTES = 8192 * 256 * 4  # the tied embedding, once: 8 MiB


def truth(s):
    """What the fix must change: allocated CUDA bytes, or every live storage on the CPU."""
    if s.cuda:
        return s.torch_memory()[0]
    return s.evaluate(live=LIVE)["live"]


def run_fix(s, cell, receipt):
    """Run a fix's cell as the browser does: ``(before, after, inventory, claimed)``, the truth
    (``truth``) before and after the cell, the inventory the cell ended with, and the bytes the
    fix's receipt toast says were freed (``browser_receipt``: from the inventory the fix acted
    on, the last cell's, and the cell's own)."""
    acted_on = s.inventories[s.count]
    before = truth(s)
    _, inventory = s.run(code=cell)
    after = truth(s)
    return before, after, inventory, receipt(acted_on, inventory, s.dev)


def freed_row(check, s, label, before, after, expected, cpu_tol=0, claimed=False):
    """Row: what a fix freed against what its finding said, on the CPU (every live storage)
    exactly or within ``cpu_tol`` bytes, within 1 MiB of torch's allocated bytes on CUDA.
    With ``claimed`` (the receipt's figure, ``run_fix``) a second row: the receipt says what
    went, within the same tolerance (at least 1 KiB on the CPU)."""
    truth = "torch.cuda.memory_allocated()" if s.cuda else "the bytes of every live storage"
    tol = MiB if s.cuda else cpu_tol
    went = before - after
    check.row(
        label,
        f"{expected} B ({expected / MiB:.2f} MiB){f' within {tol} B' if tol else ''}, by {truth}",
        f"{went} B ({went / MiB:.2f} MiB): {before} -> {after}",
        within(went, expected, tol),
    )
    if claimed is False:
        return
    tol = max(tol, 1024)
    check.row(
        f"{label}: the receipt toast's figure",
        f"= what went by {truth} within {tol} B",
        f"receipt {claimed} B"
        + ("" if claimed is None else f" ({claimed / MiB:.2f} MiB); went {went} B"),
        claimed is not None and within(claimed, went, tol),
    )


def total(by_device):
    return sum((by_device or {}).values())


class Steps(list):
    """The (step, inventory) of one test, compared with its fixture on the CPU."""

    def __init__(self, s, name):
        super().__init__()
        self.s = s
        self.path = FIXTURES / f"inventory_{name}.json"

    def __call__(self, step, inventory):
        self.append((step, inventory))

    def check(self):
        if not self.s.cuda:
            check_fixture(self.path, self, KEYS)


def variables(s):
    return s.evaluate(v="sorted(get_ipython().user_ns)")["v"]


@on_both
def test_an_optimizer_keeps_the_weights_of_a_deleted_model(
    device, session, browser_cells, browser_receipt, check
):
    s = session(name="optimizer")
    record = Steps(s, "stranded_optimizer")
    s.run(code=SETUP.format(dev=s.dev))
    _, inventory = s.run(
        code=f"model = {NET}\n"
        "opt = torch.optim.AdamW(model.parameters(), lr=1e-3)\n"
        "sched = torch.optim.lr_scheduler.StepLR(opt, 10)\n"
        "model(torch.randn(8, 512, device=DEV)).sum().backward()\n"
        "opt.step()\nsched.step()"
    )
    record("optimizer of a live model", inventory)
    # AdamW's two moments per parameter; its step counters are CPU scalars (4 x 4 bytes)
    state = {s.dev: 2 * PARAMS}
    state["cpu"] = state.get("cpu", 0) + 16
    (row,) = inventory["optimizers"]  # a model in training: its state only, nothing stranded
    assert (row["name"], row["parameters"], row["orphaned"]) == ("opt", 4, 0)
    assert row["parts"] == {"parameters": {}, "gradients": {}, "state": state}

    _, inventory = s.run(code="del model\ngc.collect()")
    record("model deleted, optimizer kept", inventory)
    (row,) = inventory["optimizers"]
    assert (row["name"], row["className"], row["referencedBy"]) == ("opt", "AdamW", ["sched"])
    assert row["parameters"] == row["orphaned"] == 4
    parts = row["parts"]
    assert parts["parameters"] == {s.dev: PARAMS} and parts["gradients"] == {s.dev: PARAMS}
    assert parts["state"] == state
    assert total(row["bytes"]) == 4 * PARAMS + 16
    assert row["valueId"] == s.evaluate(v="hex(id(opt))")["v"]
    # the variable's own figure agrees: it keeps the parameters' gradients too
    root = next(r for r in inventory["roots"] if r["name"] == "opt")
    assert total(root["bytes"]) == total(row["bytes"])

    sched_id = s.evaluate(v="hex(id(sched))")["v"]
    cell = browser_cells(
        "tensor-cells",
        "generateDeleteVariableCell",
        "opt",
        row["bytes"],
        row["valueId"],
        [{"name": "sched", "valueId": sched_id}],
    )
    before, after, inventory, claimed = run_fix(s, cell, browser_receipt)
    assert s.results[s.count].stdout + s.results[s.count].stderr == ""
    assert not {"opt", "sched"} & set(variables(s))
    expected = row["bytes"].get(s.dev, 0) if s.cuda else total(row["bytes"])
    freed_row(
        check,
        s,
        "23.1 Delete opt, sched… frees the finding's bytes (AdamW of a deleted model)",
        before,
        after,
        expected,
        claimed=claimed,
    )
    assert inventory["optimizers"] == []
    record.check()


@on_both
def test_an_optimizer_of_named_parameters_is_no_deleted_model(device, session):
    """A plain PyTorch loop: parameters the user names (``w``, ``b``), no module at all. The
    optimizer's parameters are in no model, yet a variable holds each: nothing is stranded
    (``orphaned`` 0), even after one of them is deleted while another list still names it."""
    s = session(name="named-params")
    record = Steps(s, "named_params")
    s.run(code=SETUP.format(dev=s.dev))
    _, inventory = s.run(
        code="w = torch.randn(512, 512, device=DEV, requires_grad=True)\n"
        "b = torch.zeros(512, device=DEV, requires_grad=True)\n"
        "params = [w, b]\n"
        "opt = torch.optim.Adam(params, lr=1e-2)\n"
        "for _ in range(2):\n"
        "    opt.zero_grad()\n"
        "    ((torch.randn(64, 512, device=DEV) @ w + b) ** 2).mean().backward()\n"
        "    opt.step()"
    )
    record("a loop over named parameters", inventory)
    (row,) = inventory["optimizers"]
    assert (row["name"], row["parameters"], row["orphaned"]) == ("opt", 2, 0)
    assert row["parts"]["parameters"] == {} and row["parts"]["gradients"] == {}
    _, inventory = s.run(code="del w, b")  # params still names both
    (row,) = inventory["optimizers"]
    assert row["orphaned"] == 0
    record.check()


@on_both
def test_a_caught_error_kept_in_a_variable_keeps_its_frames(
    device, session, browser_cells, browser_receipt, clean_cells, check
):
    s = session(name="kept-error")
    record = Steps(s, "kept_errors")
    s.run(code=SETUP.format(dev=s.dev))
    s.run(
        code="def step(n):\n"
        "    acts = torch.ones(n * 2**18, device=DEV)\n"
        "    small = torch.ones(2**18, device=DEV)\n"
        "    raise RuntimeError('CUDA out of memory. Tried to allocate 2.00 GiB')\n"
        "def fine():\n"
        "    try:\n"
        "        raise ValueError('no tensor here')\n"
        "    except ValueError as e:\n"
        "        return e"
    )
    _, inventory = s.run(
        code="try:\n    step(8)\nexcept RuntimeError as e:\n    err = e\nharmless = fine()"
    )
    record("a caught error kept in err", inventory)
    (row,) = inventory["keptErrors"]  # `harmless` keeps no tensor: not listed
    assert (row["name"], row["path"], row["type"]) == ("err", "err", "RuntimeError")
    assert row["bytes"] == {s.dev: 9 * MiB} and row["tensors"] == 2
    (frame,) = row["frames"]
    assert frame == {"name": "step", "local": ".acts", "bytes": {s.dev: 9 * MiB}}
    assert row["valueId"] == s.evaluate(v="hex(id(err))")["v"]

    # Clean GPU clears the kept error's frames and keeps the exception
    cell = clean_cells(inventory, "kept-error")
    assert "errors=" in cell and '("err",' in cell
    before = truth(s)
    s.run(code=cell)
    after = truth(s)
    freed_row(
        check,
        s,
        "23.2 Clean GPU clears the frames of err (err -> step -> acts, 9 MiB)",
        before,
        after,
        row["bytes"].get(s.dev, 0),
    )
    assert s.evaluate(v="type(err).__name__")["v"] == "RuntimeError"

    # a retry loop that keeps every error it caught
    _, inventory = s.run(
        code="errors = []\nfor n in (4, 2):\n    try:\n        step(n)\n"
        "    except RuntimeError as e:\n        errors.append(e)"
    )
    record("a retry loop keeps its errors", inventory)
    rows = {r["path"]: r for r in inventory["keptErrors"]}
    assert set(rows) == {"errors[0]", "errors[1]"}
    assert rows["errors[0]"]["bytes"] == {s.dev: 5 * MiB}
    assert rows["errors[1]"]["bytes"] == {s.dev: 3 * MiB}
    assert all(r["name"] == "errors" for r in rows.values())
    # the plan clears only errors named directly; the list is deleted on request
    assert "errors=" not in clean_cells(inventory, "kept-errors-list")
    cell = browser_cells(
        "tensor-cells",
        "generateDeleteVariableCell",
        "errors",
        {s.dev: 8 * MiB},
        rows["errors[0]"]["valueId"],
    )
    before, after, inventory, claimed = run_fix(s, cell, browser_receipt)
    freed_row(
        check,
        s,
        "23.2 Delete errors… frees the two kept errors' frames (5 + 3 MiB)",
        before,
        after,
        sum(r["bytes"].get(s.dev, 0) for r in rows.values()),
        claimed=claimed,
    )
    assert inventory["keptErrors"] == []
    record.check()


@on_both
def test_aliases_compiled_and_tied_models_raise_nothing(
    device, session, browser_cells, browser_receipt, check
):
    s = session(name="aliases")
    record = Steps(s, "aliases")
    s.run(code=SETUP.format(dev=s.dev))
    _, inventory = s.run(
        code="class LM(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.emb = torch.nn.Embedding(8192, 256)\n"
        "        self.head = torch.nn.Linear(256, 8192, bias=False)\n"
        "        self.head.weight = self.emb.weight  # tied input/output embeddings\n"
        "    def forward(self, x):\n"
        "        return self.head(self.emb(x))\n"
        "model = LM().to(DEV)\n"
        "same = model.to(torch.float32)  # the same object\n"
        "compiled = torch.compile(model)\n"
        "opt = torch.optim.AdamW(model.parameters())\n"
        "with torch.inference_mode():\n"
        "    score = float(model(torch.tensor([[1, 2, 3]], device=DEV)).sum())"
    )
    record("aliases, a compiled wrapper, tied weights", inventory)
    assert inventory["keptErrors"] == []
    # its optimizer, before a step: the tied weight once, in no state yet, nothing stranded
    assert [
        (o["name"], o["parameters"], o["orphaned"], o["bytes"]) for o in inventory["optimizers"]
    ] == [("opt", 1, 0, {})]
    assert len(inventory["models"]) == 1
    (model,) = inventory["models"]
    assert total(model["bytes"]) == LM_BYTES  # the tied weight once
    roots = {r["name"]: r for r in inventory["roots"]}
    assert total(roots["same"]["bytes"]) == total(roots["compiled"]["bytes"]) == 0
    assert inventory["graphs"] == []
    assert "copied" not in model  # built by its constructor

    # deliberate copies: an EMA and a best checkpoint, each its own instance under its own name
    _, inventory = s.run(
        code="import copy\nema = copy.deepcopy(model)\nbest = copy.deepcopy(model)"
    )
    record("two deliberate copies", inventory)
    by_name = {h["name"]: m for m in inventory["models"] for h in m["holders"]}
    assert by_name["ema"] is not by_name["best"] and by_name["ema"] is not by_name["model"]
    assert by_name["ema"].get("copied") is by_name["best"].get("copied") is True
    assert "copied" not in by_name["model"]
    assert all(total(by_name[n]["bytes"]) == LM_BYTES for n in ("ema", "best"))
    record.check()

    # Move to CPU… of a copy moves that model, and only it
    ema_id = s.evaluate(v="hex(id(ema))")["v"]
    cell = browser_cells("tensor-cells", "generateMoveToCpuCell", "ema", {s.dev: LM_BYTES}, ema_id)
    before, after, _, claimed = run_fix(s, cell, browser_receipt)
    devices = s.evaluate(v="[str(next(m.parameters()).device) for m in (ema, best, model)]")["v"]
    assert devices == ["cpu", s.dev, s.dev]
    # on the CPU the bytes stay where they were; on CUDA the copy's leave the GPU
    freed_row(
        check,
        s,
        "23.5 Move to CPU… of a deepcopy moves it alone (8 MiB off the GPU)",
        before,
        after,
        LM_BYTES if s.cuda else 0,
        claimed=claimed,
    )


PIPELINE = """\
import os, tempfile
from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast, pipeline
vocab = os.path.join(tempfile.mkdtemp(), "vocab.txt")
with open(vocab, "w") as f:
    f.write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]))
tok = BertTokenizerFast(vocab_file=vocab)
cfg = BertConfig(vocab_size=7, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                 intermediate_size=1024)
model = BertForSequenceClassification(cfg).to(DEV)
pipe = pipeline("text-classification", model=model, tokenizer=tok, device=DEV)
label = pipe("hello world")[0]["label"]
"""


@on_both
def test_a_pipeline_keeps_the_model_it_was_built_on(device, session, clean_cells, check):
    """Item 3: a transformers ``pipeline`` built on ``model``, then ``model`` rebound to a new
    model: the old one is held by ``pipe.model`` alone; the fix deletes ``pipe`` (deleting
    ``model`` would free nothing). Tokenizer and model are made in the cell, offline."""
    pytest.importorskip("transformers")
    s = session(name="pipeline", env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    record = Steps(s, "pipeline")
    s.run(code=SETUP.format(dev=s.dev))
    s.run(code=PIPELINE, timeout=240)
    _, inventory = s.run(code="model = BertForSequenceClassification(cfg).to(DEV)")
    record("the model rebound, the pipeline kept", inventory)
    old, new = sorted(inventory["models"], key=lambda m: m["order"])
    assert old["className"] == new["className"] == "BertForSequenceClassification"
    assert [(h["name"], h["path"]) for h in old["holders"]] == [("pipe", "pipe.model")]
    assert [(h["name"], h["path"]) for h in new["holders"]] == [("model", "model")]
    assert not old["stale"] and "copied" not in old

    cell = clean_cells.generate(inventory, modelId=old["id"], deleteNames=["pipe"])
    before = truth(s)
    s.run(code=cell)
    after = truth(s)
    freed_row(
        check,
        s,
        "23.3 Delete pipe… frees the model the pipeline was built on",
        before,
        after,
        old["bytes"].get(s.dev, 0) if s.cuda else total(old["bytes"]),
    )
    assert "pipe" not in variables(s) and "model" in variables(s)
    record.check()


@on_both
def test_a_forward_hook_appends_outputs_with_their_graphs(
    device, session, browser_cells, browser_receipt, check
):
    """Item 4: a forward hook that appends outputs to a list while the model runs without
    ``no_grad``: the list is a graph holder whose bytes count the saved inputs its graphs keep,
    and the row names the hook's module (``m[0]``) and key. The Fix… cell detaches the tensors
    and removes that hook; what it frees is the saved inputs (the outputs stay, detached)."""
    s = session(name="hook")
    record = Steps(s, "hook")
    s.run(code=SETUP.format(dev=s.dev))
    _, inventory = s.run(
        code="m = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(),\n"
        "                          torch.nn.Linear(1024, 1024)).to(DEV)\n"
        "feats = []\n"
        "h = m[0].register_forward_hook(lambda mod, args, out: feats.append(out))\n"
        "for _ in range(4):\n"
        "    m(torch.randn(256, 1024, device=DEV))"
    )
    record("a forward hook appends outputs", inventory)
    (row,) = inventory["graphs"]
    key = s.evaluate(k="next(iter(m[0]._forward_hooks))")["k"]
    assert row["hooks"] == [{"module": "m[0]", "variable": "m", "modules": ["0"], "key": key}]
    assert (row["name"], row["count"], row["gradFn"]) == ("feats", 4, "AddmmBackward0")
    own = 4 * MiB  # four outputs of 256 x 1024 float32
    assert row["bytes"][s.dev] == own + 4 * MiB  # and the four inputs they saved

    cell = browser_cells("../memory/graph-holders", "generateDetachCell", row)
    before, after, inventory, claimed = run_fix(s, cell, browser_receipt)
    freed_row(
        check,
        s,
        "23.4 Fix… of a hook-fed list frees the inputs its graphs saved",
        before,
        after,
        row["bytes"][s.dev] - own,
        claimed=claimed,
    )
    assert s.evaluate(n="len(m[0]._forward_hooks)")["n"] == 0
    assert inventory["graphs"] == []
    s.run(code="m(torch.randn(256, 1024, device=DEV))\nassert len(feats) == 4")
    record.check()
