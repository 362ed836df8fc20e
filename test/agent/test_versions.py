"""What the agent reports must read the same on every IPython the user may have (issue 16): the
differences between versions are normalised in the agent, and these tests recreate each one in
the kernel at hand, so they run in the main ``.venv`` too (``make compat`` runs them again in
the kernels of other versions, where the difference is real).

- IPython 7.33-7.34 name each cell's code object ``<cell line: N>`` instead of ``<module>``
  (``InteractiveShell._update_code_co_name``): a traceback frame of a cell's top level must be
  shown as ``<module>``, in ``lastError.frames`` and in the traceback root's name."""

import pytest

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
