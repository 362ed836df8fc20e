"""Tensors, modules and exceptions that fight inspection below the call sites of
``test_no_user_code`` (issue 46, item 2), in a real kernel: tensor subclasses that override
``data_ptr``, ``device``, ``dtype``, ``shape``, ``untyped_storage``, ``numel`` or
``__getattribute__``; a wrapper subclass with ``__torch_dispatch__``; a torch function mode
left open; a metaclass with ``__eq__``
and ``__hash__``; a module whose ``_modules``, ``_parameters`` and ``_buffers`` are dict
subclasses; ``OSError``, ``UnicodeError`` and ``SyntaxError`` attributes whose ``__str__`` or
``__repr__`` is the user's. Every override records that it ran when the agent's code is on the
stack; in one kernel each override only counts, in another it raises a ``BaseException`` of the
user's, in a third ``__getattribute__`` sleeps. After many cells (rebinding, a clean cell, failed
cells, a requested inventory, a displayed tensor) no override ran, every cell got its inventory,
the bytes are the tensors' own, and the kernel's namespace is what the cells made it."""

import time

import pytest
from kernel_driver import MODULE
from test_inventory import run_and_inventory, start

pytestmark = pytest.mark.timeout(300)

# ``hit`` records a call when the agent's code is on the stack (the user's own cells use these
# objects freely), then acts as ``builtins._gh_mode`` says: "count", "raise" (a BaseException
# of the user's) or "sleep" (1 s).
PRELUDE = r"""
import builtins, sys, time, torch
from torch.utils._pytree import tree_map
builtins._gh_hits = []
builtins._gh_mode = {mode!r}

class Boom(BaseException):
    pass

def _by_agent():
    frame = sys._getframe(2)
    while frame is not None:
        if "gpu_hygiene_agent" in str(frame.f_globals.get("__name__", "")):
            return True
        frame = frame.f_back
    return False

def hit(what):
    if not _by_agent():
        return
    builtins._gh_hits.append(what)
    if builtins._gh_mode == "raise":
        raise Boom(what)
    if builtins._gh_mode == "sleep":
        time.sleep(1)
"""

CLASSES = r'''
_B = torch._C.TensorBase

class DataPtr(torch.Tensor):
    def data_ptr(self):
        hit("DataPtr.data_ptr")
        return _B.data_ptr(self)

class Device(torch.Tensor):
    @property
    def device(self):
        hit("Device.device")
        return _B.__dict__["device"].__get__(self)

class Dtype(torch.Tensor):
    @property
    def dtype(self):
        hit("Dtype.dtype")
        return _B.__dict__["dtype"].__get__(self)

class Shape(torch.Tensor):
    @property
    def shape(self):
        hit("Shape.shape")
        return _B.size(self)
    def size(self, *args):
        hit("Shape.size")
        return _B.size(self, *args)
    def dim(self):
        hit("Shape.dim")
        return _B.dim(self)

class Storage(torch.Tensor):
    def untyped_storage(self):
        hit("Storage.untyped_storage")
        return _B.untyped_storage(self)
    def storage_offset(self):
        hit("Storage.storage_offset")
        return _B.storage_offset(self)

class Numel(torch.Tensor):
    def numel(self):
        hit("Numel.numel")
        return _B.numel(self)
    def element_size(self):
        hit("Numel.element_size")
        return _B.element_size(self)
    @property
    def nbytes(self):
        hit("Numel.nbytes")
        return _B.__dict__["nbytes"].__get__(self)

class Attr(torch.Tensor):
    def __getattribute__(self, name):
        hit("Attr.__getattribute__ " + name)
        return super().__getattribute__(name)

class MetaEq(type(torch.Tensor)):
    def __eq__(cls, other):
        hit("MetaEq.__eq__")
        return type.__eq__(cls, other)
    def __ne__(cls, other):
        hit("MetaEq.__ne__")
        return type.__ne__(cls, other)
    def __hash__(cls):
        hit("MetaEq.__hash__")
        return 7  # every such class collides: a set or dict of them compares them

class EqTensor(torch.Tensor, metaclass=MetaEq):
    pass

class EqTensor2(torch.Tensor, metaclass=MetaEq):
    pass

class Logged(torch.Tensor):
    """A subclass with ``__torch_dispatch__`` and a real storage (``as_subclass``): torch may
    ask its ``__torch_dispatch__`` for sizes and the like."""
    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        hit("Logged.__torch_dispatch__ " + str(func))
        with torch._C._DisableTorchDispatch():
            return func(*args, **(kwargs or {}))

class Wrapped(torch.Tensor):
    """A wrapper subclass (what DTensor, FakeTensor, torchao's tensors are): its sizes, strides
    and device are answered by its ``__torch_dispatch__``; its data lives in ``elem``."""
    @staticmethod
    def __new__(cls, elem):
        out = torch.Tensor._make_wrapper_subclass(
            cls, elem.shape, dtype=elem.dtype, device=elem.device,
            dispatch_sizes_strides_policy="sizes", dispatch_device=True,
        )
        out.elem = elem
        return out
    def __init__(self, elem):
        pass
    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        hit("Wrapped.__torch_dispatch__ " + str(func))
        def unwrap(x):
            return torch.Tensor.__getattribute__(x, "elem") if type(x) is Wrapped else x
        return func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))

class MetaModule(type):
    def __eq__(cls, other):
        hit("MetaModule.__eq__")
        return type.__eq__(cls, other)
    def __hash__(cls):
        hit("MetaModule.__hash__")
        return 11

class EqModule(torch.nn.Module, metaclass=MetaModule):
    pass

class EvilDict(dict):
    """A dict subclass whose every reading method is the user's."""
    def values(self):
        hit("EvilDict.values")
        return dict.values(self)
    def items(self):
        hit("EvilDict.items")
        return dict.items(self)
    def keys(self):
        hit("EvilDict.keys")
        return dict.keys(self)
    def __iter__(self):
        hit("EvilDict.__iter__")
        return dict.__iter__(self)
    def __len__(self):
        hit("EvilDict.__len__")
        return dict.__len__(self)
    def __bool__(self):
        hit("EvilDict.__bool__")
        return dict.__len__(self) > 0
    def __getitem__(self, key):
        hit("EvilDict.__getitem__")
        return dict.__getitem__(self, key)
    def get(self, key, default=None):
        hit("EvilDict.get")
        return dict.get(self, key, default)
    def __contains__(self, key):
        hit("EvilDict.__contains__")
        return dict.__contains__(self, key)
    def __eq__(self, other):
        hit("EvilDict.__eq__")
        return dict.__eq__(self, other)
    __hash__ = None

class EvilText:
    """What an exception's attribute may be: every text hook is the user's."""
    def __repr__(self):
        hit("EvilText.__repr__")
        return "'p'"
    def __str__(self):
        hit("EvilText.__str__")
        return "p"
    def __format__(self, spec):
        hit("EvilText.__format__")
        return "p"
    def __fspath__(self):
        hit("EvilText.__fspath__")
        return "p"

class MetaError(type):
    def __eq__(cls, other):
        hit("MetaError.__eq__")
        return type.__eq__(cls, other)
    def __hash__(cls):
        hit("MetaError.__hash__")
        return 13

class EqError(Exception, metaclass=MetaError):
    pass

def file_error():
    return FileNotFoundError(2, "No such file", EvilText())

def unicode_error():
    error = UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad byte")
    error.reason = EvilText()
    error.encoding = EvilText()
    return error

def os_error():
    error = OSError(5, "I/O error", "a", None, "b")
    error.strerror = EvilText()
    error.filename2 = EvilText()
    return error

def syntax_error():
    error = SyntaxError("bad")
    error.msg = EvilText()
    return error

class LeftOpen(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        hit("LeftOpen.__torch_function__ " + getattr(func, "__name__", "?"))
        return func(*args, **(kwargs or {}))

def fails(tensor, error):
    acts = tensor * 1  # a local of the failed frame: kept alive by the traceback
    raise error
'''

# Distinct sizes (float32 elements): every loose tensor is over BIG_TENSOR (1 MiB), so that its
# shape and dtype are read for the ``tensors`` rows.
N = 300_000
KINDS = ["DataPtr", "Device", "Dtype", "Shape", "Storage", "Numel", "Attr", "EqTensor", "Logged"]
DISPATCHED = {"Logged"}  # sizes answered by __torch_dispatch__: not read (shape [])
SIZES = {kind: N + 1024 * i for i, kind in enumerate(KINDS)}
WRAPPED = N + 1024 * 20
# raised by a cell (the last error); a SyntaxError whose msg is not a str is only kept (caught):
# IPython itself cannot show it
ERRORS = ["file_error", "unicode_error", "os_error"]
KEPT = 4096  # elements of each kept error's local

OBJECTS = (
    "".join(f"t_{kind} = torch.zeros({n}).as_subclass({kind})\n" for kind, n in SIZES.items())
    + f"t_Wrapped = Wrapped(torch.zeros({WRAPPED}))\n"
    + r"""
net = EqModule()
for i, K in enumerate([DataPtr, Device, Dtype, Shape, Storage, Numel, Attr, EqTensor, EqTensor2]):
    p = torch.nn.Parameter(torch.ones(16 + i).as_subclass(K))
    net.register_parameter(f"p{i}", p)
    p.grad = torch.ones(16 + i).as_subclass(K)
    net.register_buffer(f"b{i}", torch.zeros(32 + i).as_subclass(K))
net.inner = torch.nn.Linear(4, 4)
net.register_buffer("wrapped", Wrapped(torch.zeros(64)))
net.register_buffer("logged", torch.zeros(48).as_subclass(Logged))
del p, i, K
box = torch.nn.Module()
box.inner = torch.nn.Linear(8, 8)
box.register_buffer("kept", torch.zeros(100))
for _key in ("_modules", "_parameters", "_buffers"):
    box.__dict__[_key] = EvilDict(box.__dict__[_key])
losses = [(net.p0 * 2).sum(), (net.p6 * 3).sum(), (net.p7 * 4).sum()]
opt = torch.optim.SGD(net.parameters(), lr=0.1)
caught = []
for _make in (file_error, unicode_error, os_error, syntax_error, lambda: EqError("plain")):
    try:
        fails(torch.zeros(4096).as_subclass(Attr), _make())
    except BaseException as _e:
        caught.append(_e)
del _make, _key
mode = LeftOpen()
mode.__enter__()  # a torch function mode left open: every later cell runs under it
"""
)

# the net's bytes: parameters, their gradients (same sizes) and buffers, float32, its
# Linear(4, 4) child, its wrapped buffer's data and its logged buffer
NET_BYTES = 4 * sum(2 * (16 + i) + 32 + i for i in range(9)) + 4 * 20 + 4 * (64 + 48)
BOX_BYTES = 4 * (8 * 8 + 8) + 4 * 100

# names the user's cells bound, as they stand after OBJECTS (what the agent must not change)
NAMESPACE = (
    "sorted((k, id(v)) for k, v in get_ipython().user_ns.items() if type(k) is str and "
    "not k.startswith('_') and k not in ('In', 'Out', 'exit', 'quit', 'get_ipython'))"
)


def _cell(kernel, comm, code, failed=False):
    """Run a cell; return its inventory (asserts that it arrives)."""
    if not failed:
        return run_and_inventory(kernel, comm, code)[1]
    n = len(comm.messages("inventory"))
    result = kernel.run(code)
    assert result.error is not None, code
    inventory = comm.wait_for("inventory", n + 1, timeout=60)[n]
    assert inventory["executionCount"] == result.execution_count
    return inventory


def _setup(new_kernel, mode):
    kernel, comm = start(new_kernel)
    _cell(kernel, comm, PRELUDE.format(mode=mode))
    _cell(kernel, comm, CLASSES)
    inventory = _cell(kernel, comm, OBJECTS)
    return kernel, comm, inventory


def _hits(kernel):
    return kernel.evaluate(hits="list(__import__('builtins')._gh_hits)")["hits"]


def _check_bytes(inventory):
    """The tensors' own bytes, shapes and dtypes (read without their overrides)."""
    roots = {r["name"]: r for r in inventory["roots"] if r["kind"] == "variable"}
    for kind, n in SIZES.items():
        assert roots[f"t_{kind}"]["bytes"] == {"cpu": 4 * n}, (kind, roots.get(f"t_{kind}"))
    assert roots["t_Wrapped"]["bytes"] == {"cpu": 4 * WRAPPED}, roots.get("t_Wrapped")
    loose = {t["path"]: t for t in inventory["tensors"]}
    for kind, n in SIZES.items():
        row = loose[f"t_{kind}"]
        shape = [] if kind in DISPATCHED else [n]
        assert (row["bytes"], row["shape"], row["dtype"]) == (4 * n, shape, "float32"), row
    models = {m["className"]: m for m in inventory["models"]}
    assert models["EqModule"]["bytes"] == {"cpu": NET_BYTES}, models["EqModule"]
    assert models["Module"]["bytes"] == {"cpu": BOX_BYTES}, models["Module"]
    assert sorted(models) == ["EqModule", "Module"], sorted(models)
    kept = sorted(row["type"] for row in inventory["keptErrors"])
    assert kept == sorted(
        ["FileNotFoundError", "UnicodeDecodeError", "OSError", "SyntaxError", "EqError"]
    ), inventory["keptErrors"]
    assert [g["name"] for g in inventory["graphs"]] == ["losses"], inventory["graphs"]


# cells after the objects: a no-op, rebinding, a clean cell, failed cells (the last error's
# message and the out-of-memory check read the exception), a displayed tensor (Out)
AFTER = [
    ("pass", False),
    ("x = 1", False),
    ("alias = t_DataPtr", False),
    ("del x, alias", False),
    ("# gpu-hygiene: clear_gpu\npass", False),
    *[(f"fails(t_Attr, {make}())", True) for make in ERRORS],
    ("fails(t_EqTensor, EqError('x'))", True),
    ("t_Numel", False),
    ("pass", False),
]


@pytest.mark.parametrize("mode", ["count", "raise"])
def test_hostile_tensors_modules_and_errors_are_never_run(new_kernel, mode):
    kernel, comm, inventory = _setup(new_kernel, mode)
    before = kernel.evaluate(names=NAMESPACE)["names"]
    _check_bytes(inventory)
    last_errors = []
    for code, failed in AFTER:
        inventory = _cell(kernel, comm, code, failed)
        if failed:
            last_errors.append((inventory["lastError"]["type"], inventory["lastError"]["message"]))
    assert last_errors == [
        ("FileNotFoundError", "<message not read>"),
        ("UnicodeDecodeError", "<message not read>"),
        ("OSError", "<message not read>"),
        ("EqError", "x"),
    ], last_errors
    requested = comm.request_inventory()
    assert requested["skipped"] is False
    _check_bytes(requested)
    assert _hits(kernel) == []
    assert kernel.evaluate(names=NAMESPACE)["names"] == before
    assert kernel.run("print('alive')").stdout == "alive\n"


def test_a_plain_os_error_still_has_its_message(new_kernel):
    """Read without its own code, a builtin exception whose attributes are all builtin values
    still reads as ``str()`` would."""
    kernel, comm = start(new_kernel)
    inventory = _cell(kernel, comm, "open('/nonexistent/gpu-hygiene')", failed=True)
    assert inventory["lastError"] == {
        **inventory["lastError"],
        "type": "FileNotFoundError",
        "message": "[Errno 2] No such file or directory: '/nonexistent/gpu-hygiene'",
    }
    inventory = _cell(kernel, comm, "b'\\xff'.decode('utf-8')", failed=True)
    assert inventory["lastError"]["message"] == (
        "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"
    )


SLOW = r"""
import time, torch

class Slow(torch.Tensor):
    def __getattribute__(self, name):
        if _by_agent():
            builtins._gh_hits.append(name)
            time.sleep(1)
        return super().__getattribute__(name)

slow = torch.zeros(1000).as_subclass(Slow)
net = torch.nn.Linear(8, 8)
net.register_buffer("slow", torch.zeros(64).as_subclass(Slow))
"""


def test_a_slow_override_costs_no_cell_anything(new_kernel):
    kernel, comm = start(new_kernel)
    _cell(kernel, comm, PRELUDE.format(mode="count"))
    _cell(kernel, comm, SLOW)
    spent = {}
    for code in ("pass", "x = 1", "x = 2", "y = slow", "del x, y"):
        started = time.monotonic()
        inventory = _cell(kernel, comm, code)
        spent[code] = round(time.monotonic() - started, 3)
    print("per-cell wall time (s):", spent)
    assert _hits(kernel) == []
    assert max(spent.values()) < 0.5, spent
    roots = {r["name"]: r for r in inventory["roots"] if r["kind"] == "variable"}
    assert roots["slow"]["bytes"] == {"cpu": 4000}
    (model,) = inventory["models"]
    assert model["bytes"] == {"cpu": 4 * (64 + 72)}


# Test-only, run silently: the agent's own measurement raises a BaseException of the user's for
# tensors of 4321 elements, as if reading that one object had run hostile code.
BREAK_ONE = r"""
def _break_one(module={module!r}):
    import sys
    storage = sys.modules[module + ".storage"]
    measure = storage.measure
    class Boom(BaseException):
        pass
    def failing(tensor):
        if sys.modules["torch"]._C.TensorBase.numel(tensor) == 4321:
            raise Boom("one object")
        return measure(tensor)
    storage.measure = failing
_break_one()
del _break_one
"""


def test_a_base_exception_from_one_object_stays_with_it(new_kernel):
    kernel, comm = start(new_kernel)
    _cell(kernel, comm, "import torch")
    kernel.execute(BREAK_ONE.format(module=MODULE), silent=True, store_history=False)
    cells = [
        "bad = torch.zeros(4321)\nnet = torch.nn.Linear(4, 4)",
        "holder = torch.nn.Linear(2, 2)\nholder.register_buffer('bad', torch.zeros(4321))",
        "pass",
        "x = 1",
        "del x",
    ]
    for code in cells:
        inventory = _cell(kernel, comm, code)
    roots = {r["name"]: r["bytes"] for r in inventory["roots"] if r["kind"] == "variable"}
    assert roots.get("bad", {}) == {} and roots["net"] == {"cpu": 80}, roots
    models = {m["holders"][0]["name"]: m["bytes"] for m in inventory["models"]}
    assert models == {"net": {"cpu": 80}, "holder": {"cpu": 24}}, models
    assert [e["message"] for e in comm.messages("error")] == ["Boom: one object"]
    assert comm.request_inventory()["models"]
    assert kernel.run("print('alive')").stdout == "alive\n"
