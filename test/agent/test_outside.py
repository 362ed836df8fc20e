"""Issue 28, item 3, in a real kernel (CPU): a model that no variable, output or traceback
reaches is "waiting for garbage collection" only while that can be true.

- Held where the walk never goes: another module's global (``helpers._MODEL``), a class
  attribute of a class the notebook defined. The agent searches up the model's referrers and
  names the holder (``outside.holder``); nothing offers ``gc.collect()`` for it.
- Held by a local of a function another thread runs: not named (a running frame's locals are
  not read), but once it outlived a full collection it is ``survived``, never garbage.
- Garbage in a reference cycle (a list that contains itself and a model): no ``outside``, the
  "unreachable" finding; ``gc.collect()`` frees it.
- A model that survived a full collection without any holder the search can name (the same
  garbage, frozen by ``gc.freeze()``): ``outside.survived``, holder null; after
  ``gc.unfreeze()`` and a collection it is gone.
"""

import pytest
from test_holders import cell, start

pytestmark = [pytest.mark.timeout(180)]

HELPERS = """import torch
_MODEL = None
A = B = None
MODELS = []


def load():
    global _MODEL
    _MODEL = torch.nn.Linear(256, 256)
    return _MODEL


class Sly:
    # a holder whose class lies about itself: reading __class__ or any attribute through
    # __getattribute__ would run this code, which the agent must never do
    @property
    def __class__(self):
        raise RuntimeError("the agent read __class__")

    def __getattribute__(self, name):
        raise RuntimeError(f"the agent read .{name}")


SLY = Sly()
"""


def unreached(inventory):
    """{className + parameters: the model entry} of the models no root reaches."""
    return {
        (m["className"], m["parameters"]): m
        for m in inventory["models"]
        if all(h["kind"] == "hidden" for h in m["holders"])
    }


def test_held_outside_is_named_and_garbage_is_not(new_kernel, tmp_path):
    (tmp_path / "helpers.py").write_text(HELPERS)
    kernel, comm = start(new_kernel)
    # no automatic collection: the cycle below stays until gc.collect() (a young cycle can go at
    # the next generation-0 collection, before the inventory)
    cell(
        kernel,
        comm,
        f"import gc, sys, threading, torch\nsys.path.insert(0, {str(tmp_path)!r})\ngc.disable()",
    )
    inventory = cell(
        kernel,
        comm,
        "import helpers\n"
        "m = helpers.load()\n"
        "del m\n"
        "helpers.A, helpers.B = torch.nn.Linear(8, 8), torch.nn.Linear(9, 9)\n"
        "helpers.MODELS.extend([torch.nn.Linear(10, 10), torch.nn.Linear(11, 11)])\n"
        "object.__setattr__(helpers.SLY, 'model', torch.nn.Linear(12, 12))\n"
        "class Gone:\n"
        "    model = torch.nn.Linear(16, 16)\n"
        "del Gone  # a class is a cycle: its attribute is garbage now, not held\n"
        "class Cache:\n"
        "    model = None\n"
        "Cache.model = torch.nn.Linear(128, 128)\n"
        "ready, stop = threading.Event(), threading.Event()\n"
        "def work():\n"
        "    net = torch.nn.Linear(64, 64)\n"
        "    ready.set()\n"
        "    stop.wait()\n"
        "worker = threading.Thread(target=work, daemon=True)\n"
        "worker.start()\n"
        "ready.wait()\n"
        "box = [torch.nn.Linear(32, 32)]\n"
        "box.append(box)  # a cycle: garbage once the name goes\n"
        "del box",
    )
    models = unreached(inventory)
    held = {key[1]: m.get("outside") for key, m in models.items()}
    assert held[256 * 256 + 256] == {"holder": "module helpers: ._MODEL", "survived": False}
    # two models of one module, two of one list: each found, by its own path
    assert held[8 * 8 + 8]["holder"] == "module helpers: .A"
    assert held[9 * 9 + 9]["holder"] == "module helpers: .B"
    assert held[10 * 10 + 10]["holder"] == "module helpers: .MODELS[0]"
    assert held[11 * 11 + 11]["holder"] == "module helpers: .MODELS[1]"
    # through an object whose class lies about itself, read without running it
    assert held[12 * 12 + 12]["holder"].startswith("module helpers: .SLY")
    # a class attribute: the class is held by the notebook's namespace
    assert held[128 * 128 + 128] == {
        "holder": "the notebook's namespace: .Cache.model",
        "survived": False,
    }
    assert held[16 * 16 + 16] is None  # the deleted class's: garbage, waiting for gc
    # a running function's locals are not read (frame.f_locals would keep them): not named
    assert held[64 * 64 + 64] is None
    assert held[32 * 32 + 32] is None  # garbage in a cycle: waiting for gc, as before
    assert all(m["stale"] for m in models.values())

    # a collection frees the garbage and changes nothing for the held ones
    inventory = cell(kernel, comm, "gc.collect()")
    held = {key[1]: m.get("outside") for key, m in unreached(inventory).items()}
    assert 16 * 16 + 16 not in held and 32 * 32 + 32 not in held  # the garbage went
    assert {256 * 256 + 256, 128 * 128 + 128, 64 * 64 + 64} <= set(held)
    assert held[256 * 256 + 256] == {"holder": "module helpers: ._MODEL", "survived": True}
    # the thread's model outlived the collection: not garbage, whatever holds it
    assert held[64 * 64 + 64] == {"holder": None, "survived": True}

    # dropping the holders frees them (the thread's frame ends with the thread)
    inventory = cell(
        kernel,
        comm,
        "helpers._MODEL = helpers.A = helpers.B = None\nhelpers.MODELS.clear()\n"
        "del helpers.SLY\nCache.model = None\nstop.set()\nworker.join()",
    )
    assert unreached(inventory) == {}


def test_a_survivor_of_a_full_collection_is_not_called_garbage(new_kernel):
    kernel, comm = start(new_kernel)
    cell(kernel, comm, "import gc, torch")
    # frozen objects are never collected: the cycle outlives gc.collect()
    inventory = cell(
        kernel, comm, "box = [torch.nn.Linear(32, 32)]\nbox.append(box)\ngc.freeze()\ndel box"
    )
    ((_, model),) = unreached(inventory).items()
    assert "outside" not in model  # nothing holds it that the search can name: maybe garbage
    inventory = cell(kernel, comm, "gc.collect()")
    ((_, model),) = unreached(inventory).items()
    assert model["outside"] == {"holder": None, "survived": True}
    inventory = cell(kernel, comm, "gc.unfreeze()\ngc.collect()")
    assert unreached(inventory) == {}
