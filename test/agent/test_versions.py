"""What the agent reports must read the same on every IPython the user may have (issue 16): the
differences between versions are normalised in the agent, and these tests recreate each one in
the kernel at hand, so they run in the main ``.venv`` too (``make compat`` runs them again in
the kernels of other versions, where the difference is real).

- IPython 7.33-7.34 name each cell's code object ``<cell line: N>`` instead of ``<module>``
  (``InteractiveShell._update_code_co_name``): a traceback frame of a cell's top level must be
  shown as ``<module>``, in ``lastError.frames`` and in the traceback root's name.
- Ultralytics 8.1-8.2's predictor: after ``model.predict``, ``model.predictor.model`` is an
  ``AutoBackend`` module that registers the wrapper's own network as its child and keeps it as
  the plain attribute ``weights`` too, so the wrapper and the backend reach each other; the
  backend must be the wrapper's part (one model, its bytes once), not a second model (8.3 and
  later wrap the network differently)."""

import pytest
from kernel_driver import kernel_version

pytestmark = [pytest.mark.timeout(120), pytest.mark.compat]

# a cell's top level as IPython 7.34 compiles it (the frame name only: the rest of the code
# object is Python's own), raising after binding a 1 MiB tensor in that frame
OLD_IPYTHON_CELL = """
import torch
code = compile("act = torch.zeros(256, 1024)\\nraise RuntimeError('failed in an old cell')",
               "<ipython-input>", "exec").replace(co_name="<cell line: 0>")
exec(code, {"torch": torch})
"""


def test_a_cell_frame_of_ipython_7_reads_module(new_kernel):
    kernel = new_kernel()
    kernel.inject({"sampleIntervalMs": 1000})
    comm = kernel.open_comm(1000)
    n = len(comm.messages("inventory"))
    cell = kernel.run(OLD_IPYTHON_CELL)
    assert cell.error is not None and cell.error["ename"] == "RuntimeError"
    inventory = comm.wait_for("inventory", n + 1, timeout=60)[n]
    frames = [(f["name"], f["tensors"]) for f in inventory["lastError"]["frames"]]
    # the cell that ran exec, then the old-style cell's own top level, holding the tensor
    assert frames == [("<module>", 0), ("<module>", 1)]
    names = {r["name"] for r in inventory["roots"] if r["kind"] == "traceback"}
    assert names == {"last traceback (<module>)"}
    assert all("<cell line" not in t["path"] for t in inventory["tensors"])


def test_frame_name_normalises_only_cell_names():
    from conftest import load_agent

    util = load_agent().util
    renamed = compile("pass", "<x>", "exec").replace(co_name="<cell line: 12>")
    assert util.frame_name(renamed) == "<module>"
    for kept in ("<module>", "train_step", "<cell line: x>", "<lambda>", "<cell line: >"):
        code = compile("pass", "<x>", "exec").replace(co_name=kept)
        assert util.frame_name(code) == kept
    assert util.frame_name(object()) == "?"


# the shape of Ultralytics 8.2 after model.predict(), without Ultralytics: a wrapper module with
# its network, a plain predictor object whose ``model`` is a backend module that registers the
# same network and keeps it as a plain attribute as well (AutoBackend's
# ``self.__dict__.update(locals())``)
PREDICTOR_BACKEND = """
import torch

class Wrapper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())

class Backend(torch.nn.Module):
    def __init__(self, weights):
        super().__init__()
        self.model = weights
        self.__dict__.update({"weights": weights, "fp16": False})

class Predictor:
    def __init__(self, weights):
        self.model = Backend(weights)

class Trainer:
    def __init__(self):
        self.model = torch.nn.Linear(8, 8)

model = Wrapper()
model.trainer = Trainer()
model.predictor = Predictor(model.model)
"""


def test_a_predictor_backend_that_reaches_back_is_a_part_of_its_model(new_kernel):
    kernel = new_kernel()
    kernel.inject({"sampleIntervalMs": 1000})
    comm = kernel.open_comm(1000)
    n = len(comm.messages("inventory"))
    cell = kernel.run(PREDICTOR_BACKEND)
    assert cell.error is None, cell.error
    inventory = comm.wait_for("inventory", n + 1, timeout=60)[n]
    (model,) = inventory["models"]
    assert model["className"] == "Wrapper"
    assert [h["path"] for h in model["holders"]] == ["model"]
    assert model["bytes"] == {"cpu": (64 * 64 + 64) * 4}
    parts = {p["path"]: p for p in model["parts"]}
    assert parts["predictor.model"]["className"] == "Backend"
    # a model the wrapper reaches through a plain attribute stays its part too
    assert parts["trainer.model"]["className"] == "Linear"
    assert model["stale"] is False


# ipykernel 7.0's get_parent, put on the kernel at hand: the shell parent from a ContextVar
# only the kernel's own threads have set, with no fallback (7.1 and later fall back to the
# shell's context)
IPYKERNEL_7_0_GET_PARENT = """
import types
kernel = __import__("IPython").get_ipython().kernel
kernel.get_parent = types.MethodType(lambda self, channel=None: self._shell_parent.get(), kernel)
"""


@pytest.mark.skipif(
    (kernel_version("ipykernel") or (0,)) < (7,),
    reason="ipykernel 6 keeps no shell-parent ContextVar to recreate 7.0's get_parent with",
)
def test_samples_from_the_sampler_thread_still_reach_ipykernel_7_0(new_kernel):
    kernel = new_kernel()
    patched = kernel.execute(
        f"exec({IPYKERNEL_7_0_GET_PARENT!r}, {{}})", silent=True, store_history=False
    )
    assert patched.reply["status"] == "ok"
    kernel.inject({"sampleIntervalMs": 300})
    comm = kernel.open_comm(300)
    comm.wait_for("sample", 1, timeout=30)  # the sampler thread's own send (its first)
    assert len(comm.busy_samples(1.0)) >= 2  # and while a cell runs
    n = len(comm.messages("inventory"))
    cell = kernel.run("x = [1]")
    assert cell.error is None and cell.outputs == []
    comm.wait_for("inventory", n + 1, timeout=60)  # the comm was not dropped
    assert len(comm.busy_samples(1.0)) >= 2
    assert comm.messages("error") == []
