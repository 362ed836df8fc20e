"""Small helpers shared by the agent's modules: exception and text formatting, attribute reads
that run no user code, the already-imported torch, and the type sets the walks use."""

import os
import pathlib
import sys
import types
import weakref

from . import peek
from .limits import MAX_TEXT

LEAF_TYPES = frozenset(
    (str, bytes, bytearray, int, float, complex, bool, type(None), range, type(Ellipsis))
)
# Never entered: Python modules, classes, code, builtins and descriptors, weak references.
OPAQUE_TYPES = (
    types.ModuleType,
    type,
    types.CodeType,
    types.BuiltinFunctionType,
    types.WrapperDescriptorType,
    types.MethodDescriptorType,
    types.MethodWrapperType,
    types.GetSetDescriptorType,
    types.MemberDescriptorType,
    types.ClassMethodDescriptorType,
    property,
    weakref.ref,
    weakref.ProxyType,
    weakref.CallableProxyType,
)
PLAIN_CONTAINERS = (list, tuple, dict, set, frozenset)
# the same sets by id (``peek.SAFE_REPR_IDS``: membership never runs a metaclass's == or hash)
LEAF_IDS = frozenset(map(id, LEAF_TYPES))
PLAIN_IDS = frozenset(map(id, PLAIN_CONTAINERS))
MISSING = object()
# Items of a plain container looked at to call it inert (``inert``).
INERT_ITEMS = 64


def inert(value):
    """Whether ``value`` can hold nothing an inventory reports (no tensor, model, exception,
    frame, optimizer, process handle) and the holder walk would enter nothing of it: a leaf
    (``LEAF_TYPES``); a module, class or other ``OPAQUE_TYPES`` object; a plain function (no
    closure, defaults or keyword defaults); or a list, tuple, dict, set or frozenset (the exact
    types) of at most ``INERT_ITEMS`` items that are all leaves (a dict's keys and values).
    Such variables (``v0 = [0]``, ``import numpy as np``, ``def f(x): ...``) are no roots: a
    namespace of 100,000 of them costs the walk nothing. Reads builtin containers and the
    function type's own slots only: runs no code of the user."""
    cls = type(value)
    key = id(cls)
    if key in LEAF_IDS:
        return True
    if key not in PLAIN_IDS:
        if cls is types.FunctionType:
            return (
                value.__closure__ is None
                and value.__defaults__ is None
                and value.__kwdefaults__ is None
            )
        return issubclass(cls, OPAQUE_TYPES)
    if len(value) > INERT_ITEMS or not LEAF_IDS.issuperset(map(id, map(type, value))):
        return False
    return cls is not dict or LEAF_IDS.issuperset(map(id, map(type, value.values())))


def describe(exc, library=False):
    """One line ``"Type: message"`` for an exception (str, at most 500 characters). The
    message is read without running the exception's code (``peek.exc_message``): one that
    only its own ``__str__`` could give reads ``<message not read>``. ``library``: the
    exception came from the agent's own call into a library (NVML's ``nvmlInit``), never from
    the user's objects, so its ``__str__`` (``NVMLError`` asks NVML for the error's text) may
    run; any failure there falls back to the reading above."""
    text = None
    if library:
        try:
            text = str(exc)
        except BaseException:
            text = None
        if type(text) is not str:
            text = None
    if text is None:
        text = peek.exc_message(exc)
    if text is None:
        text = "<message not read>"
    first = text.splitlines()[0] if text else ""
    return encodable(peek.type_name(type(exc)) + (": " + first if first else ""))[:500]


def encodable(text):
    """``text`` (str) as UTF-8 can encode it: a lone surrogate (a name made with
    ``globals()['\\ud800']``, a path from ``surrogateescape``) becomes its ``\\udXXX`` escape.
    The common case, ASCII, costs one C call."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def short(value, limit=MAX_TEXT):
    """``value`` as an encodable str of at most ``limit`` characters (the browser rejects
    longer ones). A ``str`` subclass is copied by str's own ``__str__``; anything else that is
    not a str reads ``peek.NOT_READ`` (its ``__str__`` is never called)."""
    text = peek.plain_str(value)
    if text is None:
        text = str(value) if id(type(value)) in peek.SAFE_REPR_IDS else peek.NOT_READ
    text = encodable(text)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def frame_name(code):
    """The name a traceback frame is shown under (str): its code's ``co_name``, except that a
    cell's top level reads ``<module>`` on every IPython. IPython 7.33-7.34 renames each cell's
    code object ``<cell line: N>`` (``InteractiveShell._update_code_co_name``, for debugpy's
    cache); 8.0 and later keep ``<module>``."""
    try:
        name = code.co_name
    except Exception:
        return "?"
    if type(name) is not str:
        return "?"
    if name.startswith("<cell line: ") and name.endswith(">") and name[12:-1].isdigit():
        return "<module>"
    return name


def vars_of(obj):
    """The instance ``__dict__`` of ``obj`` without running its class's attribute hooks or a
    ``__dict__`` property (``peek.instance_dict``; dict, or an empty dict when it has none)."""
    found = peek.instance_dict(obj)
    return found if found is not None else {}


def contained(exc):
    """Whether an exception raised while reading one of the user's objects stays with that
    object (bool): anything but an interrupt (``KeyboardInterrupt``, the user's signal, which
    ``guard`` handles). A ``SystemExit`` or a ``BaseException`` of the user's class then leaves
    that object out, never the rest of the inventory nor the later ones. The class is read by
    ``type``, never by ``isinstance`` (an exception's ``__class__`` may be a property)."""
    return not peek.is_a(exc, KeyboardInterrupt)


def dict_values(value):
    """The values (list) of ``value`` when it is a dict or a dict subclass (an ``OrderedDict``, a
    user's own class), read through dict's own C method: no ``values``, ``__iter__``,
    ``__len__`` or ``__bool__`` of a subclass runs; ``[]`` for anything else."""
    if type(value) is dict or peek.is_sub(type(value), dict):
        return list(dict.values(value))
    return []


def torch_module():
    """The already-imported torch module, or None. Never imports it, and never hands out a
    torch that is still being imported (another thread must not touch a half-built module)."""
    mod = sys.modules.get("torch")
    if mod is None or not isinstance(mod, types.ModuleType):
        return None
    spec = getattr(mod, "__spec__", None)
    if spec is not None and getattr(spec, "_initializing", False):
        return None
    return mod


def cuda_initialized(torch):
    """Whether torch's CUDA state is initialised (bool). Creates no CUDA context."""
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:
        return False


_PATH_TYPES = (
    pathlib.PurePosixPath,
    pathlib.PureWindowsPath,
    pathlib.PosixPath,
    pathlib.WindowsPath,
)
_PATH_IDS = frozenset(map(id, _PATH_TYPES))


def basename(value):
    """File name of an exact str or pathlib path (a subclass's or another ``os.PathLike``'s
    ``__fspath__`` is user code), or None for anything else."""
    try:
        if id(type(value)) in _PATH_IDS:
            value = os.fspath(value)
        if type(value) is str and value:
            return os.path.basename(value.rstrip("/\\")) or value
    except Exception:
        pass
    return None


def drain(items):
    """Empty a list in place and return its former content (list)."""
    out = list(items)
    del items[:]
    return out


def machinery_frame(frame):
    """Whether a traceback frame belongs to IPython/ipykernel's own code (``run_code``), which
    holds no user data and is left out of ``lastError``."""
    try:
        name = frame.f_globals.get("__name__")
    except Exception:
        return False
    return type(name) is str and name.split(".")[0] in ("IPython", "ipykernel")
