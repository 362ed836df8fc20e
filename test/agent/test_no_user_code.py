"""The agent inspects the namespace without running the user's code (issue 31), in a real kernel:
objects that fight inspection (every hook an inspector could trigger counts its call, sleeps or
raises ``SystemExit``; a lazy proxy; a metaclass; a tensor subclass with ``__torch_function__``;
a module with an overridden ``parameters()``; an exception whose ``__str__`` exits; a ``str``
subclass name; a lone surrogate in a name) are never called, the kernel lives, the cell's time
is its own and the inventory is still sent."""

import queue
import time

import pytest
from kernel_driver import MODULE as MODULE_NAME
from test_inventory import run_and_inventory, start

pytestmark = pytest.mark.timeout(200)

# Hostile kinds, general (none of them is special-cased by the agent): ``Trap`` answers every
# hook (attribute access, ``__class__``, ``__dict__``, repr/str/format, ==, hash, len, iter,
# bool, fspath) by recording its name in ``calls`` and then sleeping 2 s or raising SystemExit
# as its mode says; its metaclass does the same for class-level hooks.
TRAPS = r'''
import sys, time, torch
calls = []

def _by_agent():
    """Whether the agent's code is on the stack (the traps act only for it: the user's own
    cells use these objects freely)."""
    frame = sys._getframe(2)
    while frame is not None:
        if "gpu_hygiene_agent" in str(frame.f_globals.get("__name__", "")):
            return True
        frame = frame.f_back
    return False

def _hit(what, mode):
    if not _by_agent():
        return
    calls.append(what)
    if mode == "sleep":
        time.sleep(2)
    elif mode == "exit":
        raise SystemExit(3)

class Meta(type):
    def __getattribute__(cls, name):
        if not name.startswith("__") or name in ("__name__", "__module__", "__qualname__",
                                                 "__dict__", "__mro__"):
            _hit("Meta." + name, "exit")
        return type.__getattribute__(cls, name)
    def __instancecheck__(cls, obj):
        _hit("Meta.__instancecheck__", "exit")
        return False
    def __subclasscheck__(cls, sub):
        _hit("Meta.__subclasscheck__", "exit")
        return False
    def __eq__(cls, other):
        _hit("Meta.__eq__", "exit")
        return False
    __hash__ = type.__hash__

class Trap(metaclass=Meta):
    def __init__(self, mode, **attrs):
        object.__setattr__(self, "_mode", mode)
        for k, v in attrs.items():
            object.__setattr__(self, k, v)  # real instance attributes
    def _hit(self, what):
        _hit("Trap." + what, object.__getattribute__(self, "_mode"))
    def __getattribute__(self, name):
        object.__getattribute__(self, "_hit")("__getattribute__ " + name)
        return object.__getattribute__(self, name)
    def __getattr__(self, name):
        object.__getattribute__(self, "_hit")("__getattr__ " + name)
        raise AttributeError(name)
    @property
    def __class__(self):
        object.__getattribute__(self, "_hit")("__class__")
        return Trap
    @property
    def __dict__(self):
        object.__getattribute__(self, "_hit")("__dict__")
        return {}
    def __repr__(self):
        object.__getattribute__(self, "_hit")("__repr__")
        return "Trap"
    def __str__(self):
        object.__getattribute__(self, "_hit")("__str__")
        return "Trap"
    def __format__(self, spec):
        object.__getattribute__(self, "_hit")("__format__")
        return "Trap"
    def __eq__(self, other):
        object.__getattribute__(self, "_hit")("__eq__")
        return False
    def __hash__(self):
        object.__getattribute__(self, "_hit")("__hash__")
        return 7
    def __len__(self):
        object.__getattribute__(self, "_hit")("__len__")
        return 1
    def __iter__(self):
        object.__getattribute__(self, "_hit")("__iter__")
        return iter(())
    def __bool__(self):
        object.__getattribute__(self, "_hit")("__bool__")
        return True
    def __fspath__(self):
        object.__getattribute__(self, "_hit")("__fspath__")
        return "x"

class Name(str):
    """A str subclass key: every str hook an inspector could call counts."""
    def __hash__(self):
        _hit("Name.__hash__", "exit")
        return str.__hash__(self)
    def __eq__(self, other):
        _hit("Name.__eq__", "exit")
        return str.__eq__(self, other)
    def __repr__(self):
        _hit("Name.__repr__", "exit")
        return "Name"
    def __str__(self):
        _hit("Name.__str__", "exit")
        return "Name"
    def __format__(self, spec):
        _hit("Name.__format__", "exit")
        return "Name"

class LazyProxy:
    """What lazy_object_proxy.Proxy does: the factory runs at the first use of the proxy
    (attribute, __class__, __dict__, repr, len, iter...), and the proxy then looks like it."""
    __slots__ = ("_factory", "_target")
    def __init__(self, factory):
        object.__setattr__(self, "_factory", factory)
    def _wrapped(self):
        try:
            return object.__getattribute__(self, "_target")
        except AttributeError:
            target = object.__getattribute__(self, "_factory")()
            object.__setattr__(self, "_target", target)
            return target
    def __getattribute__(self, name):
        if name in ("_factory", "_target", "_wrapped"):
            return object.__getattribute__(self, name)
        return getattr(object.__getattribute__(self, "_wrapped")(), name)
    @property
    def __class__(self):
        return type(object.__getattribute__(self, "_wrapped")())
    def __repr__(self):
        return repr(object.__getattribute__(self, "_wrapped")())
    def __len__(self):
        return len(object.__getattribute__(self, "_wrapped")())
    def __iter__(self):
        return iter(object.__getattribute__(self, "_wrapped")())

factory_calls = []
def factory():
    if _by_agent():
        factory_calls.append(1)
    return torch.nn.Linear(5, 5)

class Traced(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if _by_agent():
            calls.append("Traced.__torch_function__")
        return super().__torch_function__(func, types, args, kwargs or {})

class Sneaky(torch.nn.Module):
    """A model whose overridable methods count."""
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.register_buffer("traced", torch.zeros(3).as_subclass(Traced))
    def parameters(self, recurse=True):
        _hit("Sneaky.parameters", "exit")
        return super().parameters(recurse)
    def named_parameters(self, *args, **kwargs):
        _hit("Sneaky.named_parameters", "exit")
        return super().named_parameters(*args, **kwargs)
    def __getattr__(self, name):
        _hit("Sneaky.__getattr__ " + name, "count")
        return super().__getattr__(name)
    def __repr__(self):
        _hit("Sneaky.__repr__", "exit")
        return "Sneaky"
'''

PLACE = r"""
net = torch.nn.Linear(4, 4)
net.slow = Trap("sleep")                    # a plain attribute of a model
owner = Trap("exit", model=net, other=Trap("sleep"))   # an owner whose hooks exit
table = {Trap("exit"): net, "t": Trap("count"), Name("k"): Trap("exit")}
globals()[Name("shadow")] = Trap("exit")    # a str-subclass variable name
lazy = LazyProxy(factory)
sneaky = Sneaky()
traced = torch.ones(6).as_subclass(Traced)
nested = [Trap("sleep"), (Trap("exit"), {"deep": Trap("exit")})]
"""


def test_objects_that_fight_inspection_are_never_called(new_kernel):
    kernel, comm = start(new_kernel)
    run_and_inventory(kernel, comm, TRAPS)
    _, inventory = run_and_inventory(kernel, comm, PLACE)
    names = {h["name"] for m in inventory["models"] for h in m["holders"]}
    assert {"net", "sneaky", "owner", "table"} <= names, names
    assert inventory["durationMs"] < 2000  # no trap slept
    sizes = {m["className"]: m["parameters"] for m in inventory["models"]}
    assert sizes["Sneaky"] == 12 and sizes["Linear"] == 20, sizes  # from _parameters
    paths = {h["path"] for m in inventory["models"] for h in m["holders"]}
    assert "table[<Trap>]" in paths, paths  # a key labelled from its type
    # cells after: a no-op, a rebinding, an inventory the browser asks for
    for code in ("pass", "net2 = net", "del net2"):
        started = time.monotonic()
        _, inventory = run_and_inventory(kernel, comm, code)
        assert time.monotonic() - started < 10
    assert comm.request_inventory()["type"] == "inventory"
    # a failed cell whose exception's __str__ exits, with a trap in its args
    failed = kernel.run(
        "class LoudError(Exception):\n"
        "    def __str__(self):\n"
        "        _hit('LoudError.__str__', 'exit')\n"
        "        return 'loud'\n"
        "def fails(arg):\n"
        "    local = net\n"
        "    raise LoudError(arg)\n"
        "fails(Trap('exit'))"
    )
    assert failed.error is not None
    inventory = comm.wait_for("inventory", len(comm.messages("inventory")), timeout=60)[-1]
    assert inventory["lastError"]["type"] == "LoudError"
    assert inventory["lastError"]["message"] == "<message not read>"
    _, inventory = run_and_inventory(kernel, comm, "pass")
    _, inventory = run_and_inventory(kernel, comm, "x = 1")
    values = kernel.evaluate(calls="list(calls)", factory="len(factory_calls)")
    assert values == {"calls": [], "factory": 0}, values
    assert kernel.run("print('alive')").stdout == "alive\n"


def test_a_lone_surrogate_in_a_name_keeps_the_comm_talking(new_kernel):
    kernel, comm = start(new_kernel, interval_ms=250)
    run_and_inventory(kernel, comm, "import torch")
    _, inventory = run_and_inventory(kernel, comm, "globals()['m\\ud800'] = torch.nn.Linear(2, 2)")
    (model,) = inventory["models"]
    assert [h["name"] for h in model["holders"]] == ["m\\ud800"]
    # the comm still talks: samples come while a cell runs and the next inventory arrives
    assert len(comm.busy_samples(1.0)) >= 2
    _, inventory = run_and_inventory(kernel, comm, "second = torch.nn.Linear(3, 3)")
    assert len(inventory["models"]) == 2


def test_a_name_that_is_not_a_str_is_counted_as_unread(new_kernel):
    # a str subclass as a variable name could run code when hashed or compared: the variable
    # is left out of the roots, the others are walked, and the inventory says so
    kernel, comm = start(new_kernel)
    run_and_inventory(kernel, comm, "import torch")
    _, inventory = run_and_inventory(
        kernel,
        comm,
        "class K(str):\n    pass\nglobals()[K('odd')] = torch.nn.Linear(2, 2)\n"
        "net = torch.nn.Linear(2, 2)",
    )
    assert inventory["unread"]["objects"] >= 1
    assert inventory["unread"]["reasons"].get("name not a str", 0) >= 1
    named = [
        h["name"] for m in inventory["models"] for h in m["holders"] if h["kind"] == "variable"
    ]
    assert named == ["net"]


# Test-only: makes the running agent's inventory slow (a pure-Python wait, interruptible like
# any bytecode) and says through a file when it has begun, so that the test interrupts the
# kernel while the agent works, not before. Run silently; it binds nothing in the namespace.
SLOW_AGENT = r"""
def _slow_agent(marker, module={module!r}):
    import sys, time
    inventory = sys.modules[module]._agent.inventory
    fresh = inventory.fresh
    def slow(*args, **kwargs):
        open(marker, "w").close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pass
        return fresh(*args, **kwargs)
    inventory.fresh = slow
    inventory.last = None
_slow_agent({marker!r})
del _slow_agent
"""


def test_the_users_interrupt_during_the_agents_work_reaches_the_cell(new_kernel, tmp_path):
    kernel, comm = start(new_kernel)
    run_and_inventory(kernel, comm, "import torch\nimport signal")
    marker = tmp_path / "agent-busy"
    kernel.execute(
        SLOW_AGENT.format(module=MODULE_NAME, marker=str(marker)), silent=True, store_history=False
    )
    msg_id = kernel.kc.execute("net = torch.nn.Linear(2, 2)", allow_stdin=False)
    deadline = time.monotonic() + 60
    while not marker.exists():  # the cell ran; the agent's post_run_cell has begun
        assert time.monotonic() < deadline, "the agent never started its inventory"
        kernel.pump(0.05)
    interrupted = time.monotonic()
    kernel.km.interrupt_kernel()
    reply = None
    while reply is None or msg_id not in kernel.idle:
        assert time.monotonic() < deadline + 60, "no reply after the interrupt"
        if reply is None:
            try:
                candidate = kernel.kc.get_shell_msg(timeout=0.05)
            except queue.Empty:
                candidate = None
            if candidate is not None and candidate["parent_header"].get("msg_id") == msg_id:
                reply = candidate["content"]
        kernel.pump(0.05)
    assert time.monotonic() - interrupted < 30  # the agent stopped, it did not wait 60 s out
    # the cell's reply says it was interrupted (a Run All stops there), as during the cell
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    outputs = kernel.by_parent.get(msg_id, [])
    errors = [m["content"]["ename"] for m in outputs if m["msg_type"] == "error"]
    assert errors == ["KeyboardInterrupt"]
    streams = "".join(m["content"]["text"] for m in outputs if m["msg_type"] == "stream")
    assert "Error in callback" not in streams and "Traceback" not in streams, streams
    # no inventory for the interrupted cell; the kernel lives, the agent too, and the SIGINT
    # handler during a cell is the kernel's own again
    assert not [
        m for m in comm.messages("inventory") if m["executionCount"] == reply["execution_count"]
    ]
    kernel.execute(
        f"__import__('sys').modules[{MODULE_NAME!r}]._agent.inventory.__dict__.pop('fresh')",
        silent=True,
        store_history=False,
    )
    result, inventory = run_and_inventory(
        kernel, comm, "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    )
    assert result.stdout == "True\n"
    assert [m["className"] for m in inventory["models"]] == ["Linear"]


def test_fix_cells_act_only_on_the_objects_they_were_offered_for(new_kernel, generate_clean_cell):
    """ "Delete model…" of a model that ``model`` no longer holds keeps the new one; a str
    subclass key that reads ``model`` and a key whose ``__str__`` raises break nothing; a
    variable of the user's named like the cell's helper survives the cell."""
    kernel, comm = start(new_kernel)
    run_and_inventory(kernel, comm, "import torch")
    _, inventory = run_and_inventory(kernel, comm, "model = torch.nn.Linear(4, 4)")
    (old,) = inventory["models"]
    assert old["holders"][0]["valueId"].startswith("0x")
    code = generate_clean_cell(inventory, modelId=old["id"], deleteNames=["model"])
    # meanwhile: model rebound, hostile keys planted, a variable named like the helper
    run_and_inventory(
        kernel,
        comm,
        "first = model\n"
        "model = torch.nn.Linear(8, 8)\n"
        "class Loud(str):\n"
        "    def __str__(self):\n"
        "        raise SystemExit('str of a key')\n"
        "    def __eq__(self, other):\n"
        "        raise SystemExit('== of a key')\n"
        "    __hash__ = str.__hash__\n"
        "globals()[Loud('model2')] = 1\n"
        "globals()[Loud('_9')] = 2\n"
        "_gpu_hygiene_clear_gpu = 'mine'",
    )
    result, after = run_and_inventory(kernel, comm, code)
    assert result.stdout == "# model changed: kept\n"
    state = kernel.evaluate(
        model="type(model).__name__ + str(model.in_features)",
        mine="_gpu_hygiene_clear_gpu",
        first="first.in_features",
    )
    assert state == {"model": "Linear8", "mine": "mine", "first": 4}
    # offered for the object it still holds: deleted, and the helper's name left unbound
    _, inventory = run_and_inventory(kernel, comm, "del first, _gpu_hygiene_clear_gpu")
    (current,) = [m for m in inventory["models"] if m["holders"][0]["name"] == "model"]
    code = generate_clean_cell(inventory, modelId=current["id"], deleteNames=["model"])
    result, after = run_and_inventory(kernel, comm, code)
    assert result.stdout == ""
    assert [m for m in after["models"] if m["id"] == current["id"]] == []
    names = kernel.evaluate(
        names="sorted(k for k in get_ipython().user_ns if type(k) is str and k in "
        "('model', '_gpu_hygiene_clear_gpu'))"
    )
    assert names == {"names": []}


def test_a_large_namespace_and_a_variable_holding_globals(new_kernel):
    """1e5 user variables: every cell still gets its inventory, and a cell that changes nothing
    is re-sent, also while a variable holds ``globals()`` (the namespace changes at every cell:
    it is fingerprinted by its id, never one level deep)."""
    kernel, comm = start(new_kernel)
    run_and_inventory(kernel, comm, "import torch\nnet = torch.nn.Linear(2, 2)")
    kernel.execute(
        "get_ipython().user_ns.update(('v%d' % i, [i]) for i in range(100000))",
        silent=True,
        store_history=False,
    )
    _, inventory = run_and_inventory(kernel, comm, "g = globals()")
    assert [h["name"] for m in inventory["models"] for h in m["holders"]] == ["net"]
    _, inventory = run_and_inventory(kernel, comm, "pass")
    assert inventory["skipped"] is True
    _, inventory = run_and_inventory(kernel, comm, "x = 1")
    assert inventory["skipped"] is True


def test_what_torch_warns_about_is_never_read(new_kernel):
    """The agent reads gradients through torch's slots; torch warns (a ``UserWarning`` the
    kernel prints into the cell) when the ``.grad`` of a non-leaf tensor is read. The classic
    ``losses.append(loss)`` list holds such tensors: the agent prints nothing, also where the
    user asked Python to show every warning, and still counts the graphs they keep."""
    kernel, comm = start(new_kernel)
    cells = [
        "import warnings, torch\nwarnings.simplefilter('always')",
        "w = torch.ones(64, 64, requires_grad=True)\nlosses = [(w @ w).sum() for _ in range(3)]",
        "kept = (w * 2).sum()\nkept.retain_grad()\nkept.backward()",
        "losses.append((w * 3).sum())",
    ]
    for code in cells:
        result, inventory = run_and_inventory(kernel, comm, code)
        assert result.stderr == "" and result.stdout == "", (code, result.stderr)
    assert [g["name"] for g in inventory["graphs"]] == ["losses"]
    # the user's own read still warns: the filter is theirs and in place
    result, _inventory = run_and_inventory(kernel, comm, "losses[0].grad")
    assert "UserWarning" in result.stderr


def test_a_non_leaf_buffer_is_measured_without_a_warning(new_kernel):
    """A model whose buffer is computed from its weight (a non-leaf tensor): the agent re-checks
    the model's tensors at every cell and prints nothing."""
    kernel, comm = start(new_kernel)
    cells = [
        "import warnings, torch\nwarnings.simplefilter('always')",
        "net = torch.nn.Linear(16, 16)\nnet.register_buffer('ema', net.weight * 0.9)",
        "tmp = object()",
        "alias = net",
    ]
    for code in cells:
        result, inventory = run_and_inventory(kernel, comm, code)
        assert result.stderr == "" and result.stdout == "", (code, result.stderr)
    assert [m["className"] for m in inventory["models"]] == ["Linear"]
