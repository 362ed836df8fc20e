"""Issue 31, item 5, in a real kernel: a namespace of 20,000 names costs a cell what the cell did
(``namespace``), and no partial read makes the inventory say less than a full one would.

Past 2,000 names the agent reads, after a cell, the user variables that can hold something (the
roots), the names the cell mentions and those the functions it calls use, the names it added
and the next 256 names in turn; the inventory's ``namespace`` says how many it read. Each
way a cell can bind a model is tried: a plain assignment, a function that binds a global, a
function that appends to a global list, ``exec`` (read whole), a list reached only through
another name (found by the slices within names / 256 cells), a function that reaches a list
by a computed name (the model looks unreached: read whole before saying so), and a key that
is not a ``str`` (the namespace is then read whole at every cell, and the key's ``__eq__``
never runs)."""

import pytest
from conftest import MODULE, load_agent

pytestmark = pytest.mark.timeout(300)

NAMES = 20_000
SLICE = 256  # namespace.SLICE_NAMES
TAIL = 64  # namespace.TAIL_NAMES


def holders_of(inventory, class_name, features):
    """The holder names of the model of ``class_name`` with ``features`` input features."""
    for entry in inventory["models"]:
        size = features * features + features
        if entry["className"] == class_name and entry["parameters"] == size:
            return {h["name"] for h in entry["holders"]}
    raise AssertionError(f"no {class_name}({features}) in {inventory['models']}")


class Session:
    def __init__(self, kernel, comm):
        self.kernel = kernel
        self.comm = comm

    def cell(self, code):
        """Run ``code`` as a cell; the inventory sent after it."""
        n = len(self.comm.messages("inventory"))
        self.kernel.run(code)
        return self.comm.wait_for("inventory", n + 1, timeout=60)[n]


@pytest.fixture
def session(new_kernel):
    kernel = new_kernel()
    kernel.inject()
    comm = kernel.open_comm(1000)
    s = Session(kernel, comm)
    s.cell("import torch")
    return s


def partial(inventory):
    """Whether the inventory read only part of the namespace, and no more than its bound."""
    fact = inventory["namespace"]
    assert fact["names"] > NAMES
    if fact["read"] >= fact["names"]:
        return False
    # the roots, the cell's few names, the tail and one slice
    assert fact["read"] <= fact["roots"] + TAIL + SLICE + 20, fact
    return True


def test_each_way_of_binding_a_model_is_seen_in_a_large_namespace(session):
    s = session
    first = s.cell(f"get_ipython().user_ns.update(('v%d' % i, [i]) for i in range({NAMES}))")
    fact = first["namespace"]
    assert fact["read"] == fact["names"] > NAMES  # user_ns named: read whole

    # a plain assignment: the cell's own name
    inv = s.cell("m = torch.nn.Linear(4, 4)")
    assert partial(inv)
    assert holders_of(inv, "Linear", 4) == {"m"}

    # a function that binds a global, and one that appends to an existing (inert) list
    s.cell(
        "def make():\n    global v7\n    v7 = torch.nn.Linear(2, 2)\n\n"
        "def add(x):\n    v17.append(x)"
    )
    inv = s.cell("make()")
    assert partial(inv)
    assert holders_of(inv, "Linear", 2) == {"v7"}
    inv = s.cell("add(torch.nn.Linear(3, 3))")
    assert partial(inv)
    assert holders_of(inv, "Linear", 3) == {"v17"}

    # exec: any name may have changed, read whole
    inv = s.cell("exec('v9 = torch.nn.Linear(5, 5)')")
    assert inv["namespace"]["read"] == inv["namespace"]["names"]
    assert holders_of(inv, "Linear", 5) == {"v9"}

    # a list reached through another name: found there at once, under its own name once
    # the slices come round to it
    s.cell("box = [v11]")
    inv = s.cell("box[0].append(torch.nn.Linear(6, 6))")
    assert partial(inv)
    assert "box" in holders_of(inv, "Linear", 6)
    for _ in range(inv["namespace"]["cycle"] + 2):
        inv = s.cell("pass")
        if holders_of(inv, "Linear", 6) == {"box", "v11"}:
            break
    assert holders_of(inv, "Linear", 6) == {"box", "v11"}

    # a function that reaches a list by a computed name: nothing the cell names reaches the
    # model, so the namespace is read whole before it is called unreached
    s.cell("import sys\ndef hide(x):\n    getattr(sys.modules[__name__], 'v' + '18').append(x)")
    inv = s.cell("hide(torch.nn.Linear(7, 7))")
    assert inv["namespace"]["read"] == inv["namespace"]["names"]
    assert holders_of(inv, "Linear", 7) == {"v18"}

    # nothing changed: the inventory is re-sent, one slice read
    inv = s.cell("pass")
    assert inv["skipped"] and partial(inv)

    # an attribute or a comment is no word that binds names out of sight: model.eval()
    inv = s.cell("m.eval()  # load, reset, run: words of a comment")
    assert partial(inv)


def test_a_model_bound_out_of_sight_is_not_called_stale(session):
    """A function of another module binds a ``__main__`` global (a training callback keeping
    the best model): no name of the cell reaches it. The model shown as a cell's value and
    then rebound is not stale while that global holds it."""
    s = session
    s.cell(f"get_ipython().user_ns.update(('v%d' % i, [i]) for i in range({NAMES}))")
    s.cell(
        "import sys, types\n"
        "callbacks = types.ModuleType('callbacks')\n"
        "sys.modules['callbacks'] = callbacks\n"
        "exec('import sys\\ndef keep(m):\\n    sys.modules[\"__main__\"].best = m', "
        "callbacks.__dict__)\n"
        "best = None\n"
        # names bound after it: best is out of the tail the agent reads at each cell
        "get_ipython().user_ns.update(('w%d' % i, [i]) for i in range(100))"
    )
    s.cell("net = torch.nn.Linear(8, 8)")
    s.cell("net")  # Out[n] holds it too
    inv = s.cell("callbacks.keep(net)")
    assert holders_of(inv, "Linear", 8) >= {"net"}
    inv = s.cell("net = torch.nn.Linear(9, 9)")
    old = holders_of(inv, "Linear", 8)
    assert "best" in old, old
    entry = next(m for m in inv["models"] if m["parameters"] == 8 * 8 + 8)
    assert entry["stale"] is False
    # a model no variable named after a partial read: the namespace was read whole
    assert inv["namespace"]["read"] == inv["namespace"]["names"]


def test_more_unattributed_cuda_memory_makes_a_partial_read_read_whole():
    """The second guard of a partial read (``inventory.more_unattributed``): CUDA memory that
    no root reaches, grown by more than 1 MiB on some device since the last full read. (CUDA
    memory cannot exist on this machine: the figures are the inventory's, given here.)"""
    inventory = load_agent("_gpu_hygiene_agent_namespace").inventory
    before = {"cuda:0": 64 << 20}
    more = inventory.more_unattributed
    assert not more({"unattributed": {"cuda:0": (64 << 20) + (1 << 20)}}, before)
    assert more({"unattributed": {"cuda:0": (65 << 20) + 1}}, before)
    assert more({"unattributed": {"cuda:1": 2 << 20}}, before)
    assert not more({"unattributed": {}}, before)


def test_a_key_that_is_not_a_str_is_never_compared(session):
    s = session
    s.cell(
        "class Key(str):\n"
        "    calls = 0\n"
        "    def __eq__(self, other):\n"
        "        Key.calls += 1\n"
        "        return str.__eq__(self, other)\n"
        "    __hash__ = str.__hash__"
    )
    inv = s.cell(
        f"get_ipython().user_ns.update(('v%d' % i, [i]) for i in range({NAMES}))\n"
        "get_ipython().user_ns[Key('m')] = torch.nn.Linear(4, 4)"
    )
    # read whole at every cell, as a small namespace is: the key is skipped and counted
    assert "namespace" not in inv
    assert inv["unread"]["reasons"].get("name not a str") == 1
    inv = s.cell("w = torch.nn.Linear(2, 2)\nv5 = w")
    assert "namespace" not in inv
    assert holders_of(inv, "Linear", 2) == {"w", "v5"}
    assert s.kernel.evaluate(calls="Key.calls")["calls"] == 0
    agent = s.kernel.evaluate(n=f"__import__('sys').modules[{MODULE!r}]._agent is not None")
    assert agent["n"] is True
