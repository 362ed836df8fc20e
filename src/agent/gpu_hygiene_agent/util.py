"""Small helpers shared by the agent's modules: exception and text formatting, attribute reads
that run no user code, the already-imported torch, and the type sets the walks use."""

import os
import sys
import types
import weakref

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
MISSING = object()


def describe(exc):
    """One line ``"Type: message"`` for an exception (str, at most 500 characters)."""
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable>"
    first = text.splitlines()[0] if text else ""
    return (type(exc).__name__ + (": " + first if first else ""))[:500]


def short(value, limit=MAX_TEXT):
    """``value`` as a str of at most ``limit`` characters (the browser rejects longer ones)."""
    text = value if isinstance(value, str) else str(value)
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
    """The instance ``__dict__`` of ``obj`` without running its class's attribute hooks
    (dict, or an empty dict when it has none)."""
    try:
        d = object.__getattribute__(obj, "__dict__")
    except Exception:
        return {}
    return d if type(d) is dict else {}


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


def basename(value):
    """File name of a str/os.PathLike, or None for anything else."""
    try:
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if isinstance(value, str) and value:
            return os.path.basename(value.rstrip("/\\")) or value
    except Exception:
        pass
    return None


def drain(items):
    """Empty a list in place and return its former content (list)."""
    out = list(items)
    del items[:]
    return out
