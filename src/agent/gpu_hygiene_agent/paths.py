"""Names for how one object holds another (``.trainer.ema``, ``[0]``, ``['loss']``) and the
description of a reported tensor. Nothing here runs user code: containers are searched by
identity, attributes read from ``__dict__``, frames through ``gc.get_referents``."""

import collections
import functools
import gc
import itertools
import re
import types

from . import peek
from .limits import MAX_LABEL_SCAN
from .models import grad_fn as read_grad_fn
from .storage import shape_and_dtype
from .util import frame_name, short, vars_of

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


def key_label(key):
    """``[<repr>]`` of a container key (str): a bounded repr of a builtin key, ``[<Type>]`` for
    a key of another type (``peek.key_text``: the key's own repr is never called)."""
    return "[" + peek.key_text(key) + "]"


def edge_label(parent, child, grand):
    """How ``parent`` refers to ``child`` (str): ``.name``, ``[0]``, ``['key']``, ``""`` for an
    instance ``__dict__`` hop, ``<closure>``, ``<local>``, or, where no name exists (a
    reference held in C by an object of type T: an autograd node, an extension type),
    ``<in T>``. Never runs user code: containers are searched by identity, attributes read
    from ``__dict__``, slots through their member descriptors."""
    cls = type(parent)
    try:
        if cls is dict or peek.is_sub(cls, dict):
            # a dict subclass (an optimizer's state is a defaultdict keyed by parameter) is
            # read through dict's own C method: no items()/__iter__ of a subclass runs
            is_attrs = grand is not None and vars_of(grand) is parent
            for key, value in itertools.islice(dict.items(parent), MAX_LABEL_SCAN):
                if value is child:
                    if is_attrs and type(key) is str and _IDENTIFIER.match(key):
                        return "." + key
                    return key_label(key)
                if key is child:
                    return "<key>"
            return "[\u2026]"
        if cls is list or cls is tuple or cls is collections.deque:
            # a deque (a bounded history of losses) iterates in C, as a list does
            for i, value in enumerate(itertools.islice(parent, MAX_LABEL_SCAN)):
                if value is child:
                    return f"[{i}]"
            return "[\u2026]"
        if cls is set or cls is frozenset:
            return "{\u2026}"
        if vars_of(parent) is child:
            return ""
        if cls is types.FunctionType:
            return "<closure>"
        if cls is types.CellType:
            return ""
        if cls is types.MethodType:
            return ".__self__" if parent.__self__ is child else ".__func__"
        if cls is functools.partial:  # its members, read in C
            for name in ("func", "args", "keywords"):
                if getattr(parent, name) is child:
                    return "." + name
        if cls is types.FrameType:
            return frame_local_label(parent, child)
        if type(child) is types.FrameType and issubclass(cls, BaseException):
            return f".__traceback__({frame_name(child.f_code)})"
        for key, value in list(vars_of(parent).items())[:MAX_LABEL_SCAN]:
            if value is child and type(key) is str:
                return "." + key
        slot = slot_label(parent, child)
        if slot is not None:
            return slot
    except Exception:
        pass
    return "<in " + peek.type_name(cls)[:40] + ">"


def slot_label(parent, child):
    """``.name`` of the ``__slots__`` attribute of ``parent`` that holds ``child``, or None.
    Only the classes of its MRO that declare ``__slots__`` (a str, tuple or list of names in
    their own namespace) are looked at; each slot is read through its member descriptor (C
    code: no property, ``__getattr__`` or ``__getattribute__`` of the user's runs)."""
    scanned = 0
    for klass in peek.mro(type(parent)):
        namespace = peek.class_dict(klass)
        names = namespace.get("__slots__")
        if type(names) is str:
            names = (names,)
        elif type(names) is not tuple and type(names) is not list:
            continue
        for name in names:
            if type(name) is not str:
                continue
            if name.startswith("__") and not name.endswith("__"):
                # a private slot is stored under its mangled name, "_Class__name"
                name = "_" + peek.type_name(klass).lstrip("_") + name
            entry = namespace.get(name)
            if type(entry) is not peek.MEMBER:
                continue
            scanned += 1
            if scanned > MAX_LABEL_SCAN:
                return None
            try:
                value = entry.__get__(parent, klass)
            except Exception:  # an unset slot
                continue
            if value is child:
                return "." + name
    return None


def frame_local_label(frame, child):
    """Name of the local of a finished frame that refers to ``child``, without reading
    ``f_locals`` (which would snapshot the locals into the frame).

    The frame's referents other than its back frame, function, code, globals and builtins are
    its locals in ``co_varnames + co_cellvars + co_freevars`` order when every local is bound.
    Before Python 3.13, a frame whose ``f_locals`` someone already read (IPython's traceback
    rendering, a debugger) also refers to that snapshot dict: its keys name the locals, so it
    is used by identity and left out of the positional match. Otherwise ``<local>``."""
    code = frame.f_code
    names = code.co_varnames + code.co_cellvars + code.co_freevars
    refs = [
        r
        for r in gc.get_referents(frame)
        if r is not frame.f_back
        and r is not code
        and not (type(r) is types.FunctionType and r.__code__ is code)
        and r is not frame.f_globals
        and r is not frame.f_builtins
    ]
    snapshot = _locals_snapshot(refs, names)
    if snapshot is not None:
        refs = [r for r in refs if r is not snapshot]
        for name, value in list(snapshot.items()):
            if value is child:
                return "." + name
    if len(refs) == len(names):
        for name, ref in zip(names, refs):
            if ref is child:
                return "." + name
    return "<local>"


def _locals_snapshot(refs, names):
    """The frame's ``f_locals`` snapshot among its referents, or None: a non-empty dict whose
    keys are all local names and whose values are all other referents of the frame (a user's
    own dict local does not pass both)."""
    for d in refs:
        if type(d) is not dict or not d or len(d) > len(names):
            continue
        try:
            items = list(d.items())
        except Exception:
            continue
        if all(
            type(k) is str and k in names and any(v is r for r in refs if r is not d)
            for k, v in items
        ):
            return d
    return None


def tensor_meta(tensor):
    """{shape: [int], dtype: str, gradFn: str | None} of a tensor, read through torch's C
    accessors (``storage.shape_and_dtype``: no ``shape``/``dtype`` of a subclass runs); never
    raises."""
    shape, dtype = shape_and_dtype(tensor)
    shape = shape[:16]
    fn = read_grad_fn(tensor)
    grad_fn = peek.type_name(type(fn)) if fn is not None else None
    return {"shape": shape, "dtype": short(dtype, 64), "gradFn": grad_fn and short(grad_fn, 100)}
