"""Tensor storages: what one tensor's memory is (device, base pointer, bytes), measured once and
cached under a weak reference, and sums of storages per device.

A tensor is read through torch's own C accessors, called unbound on it (``Reads``): the
``data_ptr``, ``untyped_storage``, ``numel`` and ``size`` methods and the ``device`` and
``dtype`` slots of ``torch._C.TensorBase``, the ``data_ptr`` and ``nbytes`` of
``torch._C.StorageBase``. A subclass's method or property of the same name, its
``__getattribute__`` or ``__getattr__`` never runs; its ``__torch_function__`` (and a torch
function mode's) neither, since the agent reads inside ``DisableTorchFunction``
(``inventory.no_torch_function``). A tensor whose class has ``__torch_dispatch__`` (torch's
``Python`` dispatch key) may answer its sizes, strides, device and data pointer through that
Python code: none of them is read; it is measured by its storage alone (pointer, bytes, device:
``StorageBase``'s, which never dispatch). A wrapper subclass (DTensor, FakeTensor, torchao's)
has no real storage (``measure``: None): its data lives in the tensors it keeps in its
attributes (``inner_tensors``), which the holder walk and the model measurement read instead."""

import sys
import weakref
from typing import NamedTuple

from . import peek
from .limits import MAX_CACHED_STORAGES
from .util import contained, torch_module, vars_of


class StorageKey(NamedTuple):
    """Identity of one storage: shared storages (views, tied weights) have the same key."""

    device: str  # "cpu", "cuda:0", ...
    ptr: int  # the storage's data_ptr()


class Measured(NamedTuple):
    """A tensor's storage as measured; also the entry of the cache ``CACHE``."""

    ref: object  # weak reference to the tensor, or None for a type without weak references
    ptr: int  # tensor.data_ptr() when measured: a tensor whose data moved is measured again
    key: StorageKey
    nbytes: int  # bytes of the whole storage


CACHE = {}  # id(tensor) -> Measured


class Reads(NamedTuple):
    """torch's own accessors of a tensor and of a storage (``reads``), each called unbound on
    the object: C code that runs no Python of a tensor subclass (see the module docstring)."""

    torch: object  # the torch module they were read from
    tensor_type: object  # torch.Tensor
    plain: frozenset  # ids of torch.Tensor and torch.nn.Parameter: no dispatch key to check
    data_ptr: object  # TensorBase.data_ptr
    storage: object  # TensorBase.untyped_storage
    numel: object  # TensorBase.numel
    size: object  # TensorBase.size
    device: object  # the ``device`` slot's getter
    dtype: object  # the ``dtype`` slot's getter
    storage_ptr: object  # StorageBase.data_ptr
    storage_nbytes: object  # StorageBase.nbytes
    dispatch_keys: object  # torch._C._dispatch_keys
    python_key: object  # torch._C.DispatchKey.Python
    storage_device: object  # the getter of StorageBase's ``device`` slot, or None


_READS = [None]  # the Reads of the torch module last seen
_MODULES = sys.modules


def _c_names(torch):
    """The namespace of ``torch._C`` (dict; read from module dicts, no module ``__getattr__``)."""
    c = vars_of(torch).get("_C")
    return vars_of(c) if c is not None else {}


def reads():
    """The ``Reads`` of the imported torch, or None (no torch, or one without these C
    accessors: tensors are then not measured). Looked up once per torch module."""
    cached = _READS[0]
    if cached is not None and cached[0] is _MODULES.get("torch"):
        return cached  # the common case: one dict lookup
    torch = torch_module()
    if torch is None:
        return None
    names = _c_names(torch)
    tensor_base = names.get("TensorBase") or names.get("_TensorBase")
    storage_base = names.get("StorageBase") or names.get("_StorageBase")
    keys = names.get("DispatchKey")
    if tensor_base is None or storage_base is None or keys is None:
        return None
    tensor_ns = peek.class_dict(tensor_base)
    storage_ns = peek.class_dict(storage_base)
    device = tensor_ns.get("device")
    dtype = tensor_ns.get("dtype")
    found = (
        tensor_ns.get("data_ptr"),
        tensor_ns.get("untyped_storage"),
        tensor_ns.get("numel"),
        tensor_ns.get("size"),
        device.__get__ if type(device) is peek.GETSET else None,
        dtype.__get__ if type(dtype) is peek.GETSET else None,
        storage_ns.get("data_ptr"),
        storage_ns.get("nbytes"),
        names.get("_dispatch_keys"),
        peek.class_dict(keys).get("Python"),
    )
    if any(f is None for f in found):
        return None
    tensor_type = vars_of(torch).get("Tensor")
    nn = vars_of(torch).get("nn")
    parameter = vars_of(nn).get("Parameter") if nn is not None else None
    if tensor_type is None:
        return None
    plain = frozenset(id(c) for c in (tensor_type, parameter) if c is not None)
    storage_device = storage_ns.get("device")
    storage_device = storage_device.__get__ if type(storage_device) is peek.GETSET else None
    _READS[0] = Reads(torch, tensor_type, plain, *found, storage_device)
    return _READS[0]


def python_dispatched(tensor, r):
    """Whether ``tensor`` has torch's ``Python`` dispatch key (bool): its class defines
    ``__torch_dispatch__``, which then answers its sizes, device and data pointer. ``r``: the
    ``Reads``. Exact ``torch.Tensor`` and ``Parameter`` instances are not asked."""
    if id(type(tensor)) in r.plain:
        return False
    return bool(r.dispatch_keys(tensor).has(r.python_key))


def data_ptr(tensor):
    """A tensor's data pointer (int) through torch's C method; for a tensor with the
    ``Python`` dispatch key its storage's (0 for a wrapper subclass, which has none); 0
    without torch's accessors. Raises what torch raises (no Python of the tensor's class
    runs)."""
    r = reads()
    if r is None:
        return 0
    if id(type(tensor)) not in r.plain and python_dispatched(tensor, r):
        try:
            return r.storage_ptr(r.storage(tensor))
        except RuntimeError:  # "an invalid python storage": a wrapper subclass
            return 0
    return r.data_ptr(tensor)


def numel(tensor):
    """A tensor's number of elements (int) through torch's C method; 0 for a tensor with the
    ``Python`` dispatch key (its ``__torch_dispatch__`` would answer) or without torch's
    accessors."""
    r = reads()
    if r is None or python_dispatched(tensor, r):
        return 0
    return int(r.numel(tensor))


def shape_and_dtype(tensor):
    """([int] sizes, dtype name) of a tensor through torch's C accessors: sizes ``[]`` for a
    tensor with the ``Python`` dispatch key (its ``__torch_dispatch__`` would answer), ``"?"``
    for what cannot be read. Never raises."""
    r = reads()
    if r is None:
        return [], "?"
    try:
        dtype = str(r.dtype(tensor)).replace("torch.", "")
    except BaseException as exc:
        if not contained(exc):
            raise
        dtype = "?"
    try:
        sizes = [] if python_dispatched(tensor, r) else [int(n) for n in r.size(tensor)]
    except BaseException as exc:
        if not contained(exc):
            raise
        sizes = []
    return sizes, dtype


def inner_tensors(tensor):
    """The tensors a tensor with the ``Python`` dispatch key keeps in its instance attributes
    (list; directly or in a plain list or tuple there): where a wrapper subclass's data lives.
    Empty for any other tensor. Read from the instance ``__dict__`` only."""
    r = reads()
    if r is None or id(type(tensor)) in r.plain or not python_dispatched(tensor, r):
        return []
    tensor_type = r.tensor_type
    out = []
    for value in list(vars_of(tensor).values()):
        if peek.is_a(value, tensor_type):
            out.append(value)
        elif type(value) is list or type(value) is tuple:
            out.extend(v for v in value[:64] if peek.is_a(v, tensor_type))
    return out


def measure(tensor):
    """The ``Measured`` storage of a tensor; None for meta tensors, empty storages, tensors
    with the ``Python`` dispatch key (``inner_tensors`` hold their data) and without torch's
    accessors. Raises what torch raises for a tensor without a storage (sparse layouts).

    Answers are cached under a weak reference to the tensor and re-checked against its data
    pointer (0.1 us instead of the 0.5 us of reading the storage): a tensor whose data moved
    (``.data =``, ``set_``, a resize that reallocated) is measured again."""
    r = _READS[0]
    if r is None or r[0] is not _MODULES.get("torch"):
        r = reads()  # torch imported (again) since: looked up once
        if r is None:
            return None
    cached = CACHE.get(id(tensor))
    if cached is not None and cached.ref() is tensor:  # measured: no Python dispatch key
        ptr = r.data_ptr(tensor)
        if cached.ptr == ptr:
            return cached
    elif id(type(tensor)) not in r.plain and python_dispatched(tensor, r):
        return _by_storage(tensor, r)
    else:
        ptr = r.data_ptr(tensor)
    device = r.device(tensor)
    if device.type == "meta":
        return None
    storage = r.storage(tensor)
    base = r.storage_ptr(storage)
    nbytes = int(r.storage_nbytes(storage))
    if base == 0 or nbytes == 0:
        return None
    key = StorageKey(str(device), base)
    if len(CACHE) >= MAX_CACHED_STORAGES:
        CACHE.clear()
    try:
        measured = Measured(weakref.ref(tensor), ptr, key, nbytes)
    except TypeError:  # a tensor type without weak references: not cached
        return Measured(None, ptr, key, nbytes)
    CACHE[id(tensor)] = measured
    return measured


def _by_storage(tensor, r):
    """``measure`` of a tensor with the ``Python`` dispatch key: its storage's pointer, bytes
    and device (not cached: a cache hit re-reads the tensor's own data pointer); None for a
    wrapper subclass, whose storage is no real one."""
    if r.storage_device is None:
        return None
    storage = r.storage(tensor)
    try:
        base = r.storage_ptr(storage)
    except RuntimeError:  # "an invalid python storage": a wrapper subclass
        return None
    device = r.storage_device(storage)
    nbytes = int(r.storage_nbytes(storage))
    if device.type == "meta" or base == 0 or nbytes == 0:
        return None
    return Measured(None, base, StorageKey(str(device), base), nbytes)


def storage_of(tensor):
    """``measure(tensor)``, or None when it cannot be measured. Raises only an interrupt
    (``util.contained``)."""
    try:
        return measure(tensor)
    except BaseException as exc:
        if not contained(exc):
            raise
        return None


def add_storage(tensor, storages):
    """Record the storage of ``tensor`` in ``storages`` ({StorageKey: nbytes}).

    Meta tensors and empty storages are skipped. Raises what torch raises for tensors without
    a storage (sparse layouts, some subclasses); callers catch.
    """
    measured = measure(tensor)
    if measured is not None:
        storages[measured.key] = measured.nbytes


def bytes_by_device(storages):
    """Sum {StorageKey: nbytes} into {device: bytes}."""
    out = {}
    for key, nbytes in storages.items():
        out[key[0]] = out.get(key[0], 0) + nbytes
    return out
