"""Exceptions stay inside the agent: they become `error` comm messages (each distinct one once)
and never reach a user cell's output."""

import time

import pytest
from conftest import MODULE, PROTOCOL

pytestmark = pytest.mark.timeout(120)

AGENT = f"__import__('sys').modules[{MODULE!r}]._agent"

HOSTILE = '''
import torch

class Hostile:
    """Raises from every hook the agent could be tempted to call."""
    def __eq__(self, other):
        raise RuntimeError("hostile __eq__")
    def __hash__(self):
        raise RuntimeError("hostile __hash__")
    def __getattr__(self, name):
        raise RuntimeError("hostile __getattr__ " + name)
    def __repr__(self):
        raise RuntimeError("hostile __repr__")
    def __len__(self):
        raise RuntimeError("hostile __len__")
    def __iter__(self):
        raise RuntimeError("hostile __iter__")
    @property
    def __class__(self):
        raise RuntimeError("hostile __class__")

class HostileNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
    def __eq__(self, other):
        raise RuntimeError("hostile module __eq__")
    def __hash__(self):
        raise RuntimeError("hostile module __hash__")
    def __getattr__(self, name):
        if name in ("fc", "_parameters", "_buffers", "_modules"):
            return super().__getattr__(name)
        raise RuntimeError("hostile module __getattr__ " + name)

class WithOddBuffer(torch.nn.Module):
    """A buffer torch itself cannot measure (a sparse tensor has no storage). (A subclass's
    ``untyped_storage`` override is never called: test_hostile_tensors.py.)"""
    def __init__(self):
        super().__init__()
        self.register_buffer("odd", torch.zeros(4).to_sparse())

hostile = Hostile()
box = [Hostile(), {"k": Hostile()}]
net = HostileNet()
odd = WithOddBuffer()
x = 1
'''


def test_hostile_user_objects_do_not_break_the_inventory(new_kernel):
    kernel = new_kernel()
    kernel.inject({"sampleIntervalMs": 500})
    comm = kernel.open_comm(500)
    n = len(comm.messages("inventory"))
    cell = kernel.run(HOSTILE)
    assert cell.error is None, cell.error
    assert cell.outputs == []  # nothing from the agent in the user's cell
    inventory = comm.wait_for("inventory", n + 1, timeout=60)[n]
    by_class = {m["className"]: m for m in inventory["models"]}
    assert set(by_class) == {"HostileNet", "WithOddBuffer"}
    assert {h["name"] for h in by_class["HostileNet"]["holders"]} == {"net"}
    assert by_class["HostileNet"]["parameters"] == 20
    assert by_class["HostileNet"]["bytes"] == {"cpu": 80}
    # the buffer torch cannot measure is left out and reported once
    assert by_class["WithOddBuffer"]["bytes"] == {}
    errors = comm.messages("error")
    assert [(e["where"], e["message"]) for e in errors] == [
        (
            "inventory",
            "RuntimeError: Cannot access data pointer of Tensor that doesn't have storage",
        )
    ]
    cell = kernel.run("y = 2")
    assert cell.outputs == []
    comm.wait_for("inventory", n + 2)
    time.sleep(0.3)
    assert len(comm.messages("error")) == 1  # the same error is not sent again


def test_a_failing_agent_internal_becomes_one_error_message(new_kernel):
    kernel = new_kernel()
    kernel.inject({"sampleIntervalMs": 300})
    comm = kernel.open_comm(300)
    before = kernel.evaluate(ns="sorted(get_ipython().user_ns)")["ns"]
    # break two internals through a silent execute, as another extension might
    sabotage = f"{AGENT}.inventory.fresh = lambda *a: 1 / 0\n{AGENT}.sample = lambda: [][1]"
    sabotaged = kernel.execute(sabotage, silent=True, store_history=False)
    assert sabotaged.reply["status"] == "ok" and sabotaged.iopub == []
    n_inventory = len(comm.messages("inventory"))
    # each cell changes the namespace, so none of them can re-send the last inventory
    for code in ("a = [1]", "b = [2]", "raise ValueError('user error')"):
        cell = kernel.run(code)
        if code.startswith("raise"):
            # the user's own error is shown as usual, and nothing else
            assert [m["msg_type"] for m in cell.outputs] == ["error"]
            assert cell.error["ename"] == "ValueError"
        else:
            assert cell.outputs == [], cell.outputs
    time.sleep(0.8)
    errors = [(e["where"], e["message"]) for e in comm.messages("error")]
    assert errors.count(("inventory", "ZeroDivisionError: division by zero")) == 1
    assert errors.count(("sample", "IndexError: list index out of range")) == 1
    assert len(errors) == 2
    assert len(comm.messages("inventory")) == n_inventory
    after = set(kernel.evaluate(ns="sorted(get_ipython().user_ns)")["ns"])
    # only what the cells themselves bind (and IPython's input-history names)
    assert after >= set(before)
    assert after - set(before) - {"_i", "_ii", "_iii"} == {"a", "b", "_i1", "_i2", "_i3"}

    # repaired: inventories and samples flow again, the sampler thread survived
    kernel.execute(f"del {AGENT}.inventory.fresh, {AGENT}.sample", silent=True, store_history=False)
    n_samples = len(comm.messages("sample"))
    kernel.run("c = [3]")
    comm.wait_for("inventory", n_inventory + 1)
    comm.wait_for("sample", n_samples + 1)  # the sample that closes the cell


def test_an_inventory_request_that_fails_answers_with_an_error(new_kernel):
    kernel = new_kernel()
    kernel.inject({"sampleIntervalMs": 1000})
    comm = kernel.open_comm(1000)
    kernel.execute(
        f"{AGENT}.inventory.module_dicts.ids = lambda: {{}}['nope']",
        silent=True,
        store_history=False,
    )
    comm.send({"protocol": PROTOCOL, "type": "inventory"})
    (error,) = comm.wait_for("error")
    assert error == {
        "protocol": PROTOCOL,
        "type": "error",
        "where": "inventory",
        "message": "KeyError: 'nope'",
    }
