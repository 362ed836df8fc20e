"""Reading the user's objects the way a debugger that must not disturb does: no method, property,
``__getattr__``/``__getattribute__``, ``__class__``, ``__repr__``/``__str__``/``__format__``,
``__eq__``/``__hash__``, metaclass hook or overridden ``nn.Module`` method of the user's runs.

- a class is read through ``type``'s own slot descriptors (``__mro__``, ``__name__``,
  ``__dict__``), never through attribute lookup on the class (a metaclass could answer);
- "is an instance of" is ``type(obj)`` and its MRO compared by identity (``isinstance`` falls
  back to ``obj.__class__``; ``issubclass`` on a user's class can run its metaclass's
  ``__subclasscheck__``);
- an instance's ``__dict__`` is read through the ``__dict__`` slot descriptor of the class that
  owns it (``object.__getattribute__(o, "__dict__")`` and ``inspect.getattr_static`` both run a
  ``__dict__`` property a class defines);
- an exception's message only where it is a plain ``str`` argument and the class keeps the
  built-in ``__str__``;
- a key or label only from builtin types, with a bounded repr of builtin values only.

Whatever can only be had by running the user's code, or whose reading failed, is left out and
counted (``Skips``): the inventory says how many objects it could not read (``unread``)."""

import types

# type's own slot descriptors: they read the C struct of a class, whatever its metaclass says
_TYPE_MRO = type.__dict__["__mro__"]
_TYPE_NAME = type.__dict__["__name__"]
_TYPE_DICT = type.__dict__["__dict__"]
_TYPE_MODULE = type.__dict__["__module__"]
_EXC_ARGS = BaseException.__dict__["args"]
_EXC_CAUSE = BaseException.__dict__["__cause__"]
_EXC_CONTEXT = BaseException.__dict__["__context__"]
_EXC_TRACEBACK = BaseException.__dict__["__traceback__"]
_BASE_STR = BaseException.__dict__["__str__"]
GETSET = types.GetSetDescriptorType
MEMBER = types.MemberDescriptorType
_STR_STR = str.__str__

# builtin values whose repr runs no user code (exact types only: a subclass's repr may)
SAFE_REPR_TYPES = (str, int, float, bool, bytes, complex, type(None))
# Type sets are looked up by id: ``cls in some_tuple`` runs ``==`` of the user's metaclass on a
# class of the user's, and a set hashes it (its metaclass's ``__hash__``); builtin types live as
# long as the interpreter, so their ids are theirs.
SAFE_REPR_IDS = frozenset(map(id, SAFE_REPR_TYPES))
NOT_READ = "\u2026"  # the label of what could not be read without running user code
MISSING = object()


def mro(cls):
    """The MRO of a class (tuple), read from the type's slot (no metaclass ``__mro__`` or
    ``mro()`` runs); ``()`` for something that is not a class."""
    try:
        return _TYPE_MRO.__get__(cls)
    except Exception:
        return ()


def is_a(obj, cls):
    """Whether ``type(obj)`` is ``cls`` or has it in its MRO (bool): ``isinstance`` without
    reading ``obj.__class__`` and without any ``__instancecheck__``/``__subclasscheck__``."""
    if cls is None:
        return False
    for klass in mro(type(obj)):  # noqa: SIM110 -- hot path, no generator
        if klass is cls:
            return True
    return False


def is_sub(klass, cls):
    """``issubclass(klass, cls)`` by ``klass``'s MRO, compared by identity (bool)."""
    for base in mro(klass):  # noqa: SIM110 -- hot path, no generator
        if base is cls:
            return True
    return False


def type_name(cls):
    """A class's ``__name__`` (str) from the type's slot; ``"?"`` when it cannot be read."""
    try:
        name = _TYPE_NAME.__get__(cls)
    except Exception:
        return "?"
    return name if type(name) is str else "?"


def type_module(cls):
    """A class's ``__module__`` (str) from its own namespace; ``""`` when it is not a str."""
    try:
        name = _TYPE_MODULE.__get__(cls)
    except Exception:
        return ""
    return name if type(name) is str else ""


def class_dict(cls):
    """A class's own namespace (a read-only mapping; ``{}`` when it cannot be read)."""
    try:
        return _TYPE_DICT.__get__(cls)
    except Exception:
        return {}


def instance_dict(obj):
    """The instance ``__dict__`` of ``obj`` (dict), or None when it has none: read through the
    ``__dict__`` slot descriptor of the first class in its MRO that has one, so that a
    ``__dict__`` property (or any other override) is passed over and never called."""
    for klass in mro(type(obj)):
        try:
            entry = class_dict(klass).get("__dict__")
        except Exception:
            return None
        if type(entry) is GETSET or type(entry) is MEMBER:  # C slots (SimpleNamespace: a member)
            try:
                found = entry.__get__(obj, type(obj))
            except Exception:
                return None
            return found if type(found) is dict else None
    return None


def static_class_attr(cls, name):
    """The raw value of ``name`` in the namespace of ``cls`` or the first class of its MRO that
    defines it (descriptors are returned, not called), or ``MISSING``."""
    for klass in mro(cls):
        namespace = class_dict(klass)
        if name in namespace:
            return namespace[name]
    return MISSING


def exc_args(exc):
    """An exception's ``args`` (tuple) through BaseException's slot; ``()`` otherwise."""
    try:
        args = _EXC_ARGS.__get__(exc)
    except Exception:
        return ()
    return args if type(args) is tuple else ()


def exc_link(exc, which):
    """``__cause__`` / ``__context__`` / ``__traceback__`` of an exception through
    BaseException's slots (a class's property of the same name is never called), or None."""
    slot = {"__cause__": _EXC_CAUSE, "__context__": _EXC_CONTEXT}.get(which, _EXC_TRACEBACK)
    try:
        return slot.__get__(exc)
    except Exception:
        return None


# The builtin exceptions whose ``__str__`` (C) reads attributes of their own besides ``args``:
# ``OSError``'s ``errno``, ``strerror``, ``filename``, ``filename2`` (``repr(filename)``), the
# ``UnicodeError``s' ``encoding``, ``object``, ``start``, ``end``, ``reason`` (``str(reason)``),
# ``SyntaxError``'s ``msg`` (``str(msg)``), ``filename`` and ``lineno``. Any object of the
# user's may be set there. (``ImportError``'s reads ``msg`` only when it is an exact str;
# ``AttributeError``'s and ``NameError``'s are ``BaseException``'s: ``args`` alone.)
_ATTR_STR_IDS = frozenset(
    map(id, (OSError, UnicodeEncodeError, UnicodeDecodeError, UnicodeTranslateError, SyntaxError))
)
_BASE_SLOTS = frozenset(BaseException.__dict__)  # args, __traceback__...: never these


def _builtin_attrs_safe(exc):
    """Whether every attribute that the builtin classes of the exception's MRO keep in its C
    struct (besides BaseException's) holds a builtin value (``SAFE_REPR_TYPES``) or is unset
    (bool). Each is read through the member or getset descriptor of the builtin class that
    defines it (C: a subclass's property of that name is never called)."""
    for klass in mro(type(exc)):
        if klass is BaseException or klass is object or type_module(klass) != "builtins":
            continue
        for name, entry in list(class_dict(klass).items()):
            if (type(entry) is not MEMBER and type(entry) is not GETSET) or name in _BASE_SLOTS:
                continue
            try:
                value = entry.__get__(exc, klass)
            except Exception:  # unset (OSError's characters_written)
                continue
            if id(type(value)) not in SAFE_REPR_IDS:
                return False
            if (type(value) is str or type(value) is bytes) and len(value) > 100000:
                return False
    return True


def exc_message(exc):
    """The message of an exception (str), or None when only the user's code could give it:
    the class keeps a builtin exception's ``__str__`` (C) and every value that ``__str__``
    reads is a builtin one (``SAFE_REPR_TYPES``, or a tuple of them): every argument and, for
    the ``__str__`` of ``OSError``, the ``UnicodeError``s and ``SyntaxError``
    (``_ATTR_STR_IDS``), every attribute of the builtin classes of its MRO
    (``FileNotFoundError(2, msg, path)`` shows ``repr(path)``, a ``UnicodeDecodeError``
    ``str(reason)``: ``_builtin_attrs_safe``); that ``__str__`` is then called, as ``str(exc)``
    would (``KeyError``'s repr of the key included). A ``__str__`` written in Python, or an
    argument or attribute of another type: None."""
    cls = type(exc)
    method = static_class_attr(cls, "__str__")
    if method is MISSING or type(method) is not types.WrapperDescriptorType:
        return None  # a Python-level __str__: user code
    owner = getattr(method, "__objclass__", None)  # the builtin exception class of the slot
    if owner is None or type_module(owner) != "builtins":
        return None
    args = exc_args(exc)
    flat = []  # the arguments, a tuple's items in place of it (a SyntaxError's location)
    for a in args:
        if type(a) is tuple and len(a) <= 8:
            flat.extend(a)
        else:
            flat.append(a)
    if not all(id(type(a)) in SAFE_REPR_IDS for a in flat):
        return None  # str() or repr() of an argument would run its code
    if sum(len(a) for a in flat if type(a) is str or type(a) is bytes) > 100000:
        return None  # bounded cost
    if id(owner) in _ATTR_STR_IDS and not _builtin_attrs_safe(exc):
        return None  # an attribute of the user's type, which that __str__ shows
    try:
        text = method(exc)  # BaseException's, KeyError's (repr of the key)...: C, on builtins
    except Exception:
        return None
    return text if type(text) is str else None


def safe_repr(value, limit=60):
    """``repr`` of a builtin value (exact ``str``, ``int``, ``float``, ``bool``, ``bytes``,
    ``complex``, ``None``, or a tuple of them), at most ``limit`` characters; None for anything
    else (its repr could run user code). An int too large for ``repr``'s digit limit is
    shown by its size."""
    cls = type(value)
    try:
        if id(cls) in SAFE_REPR_IDS:
            if cls is str and len(value) > limit:
                value = value[:limit]
            if cls is bytes and len(value) > limit:
                value = value[:limit]
            text = repr(value)
        elif cls is tuple and len(value) <= 8 and all(id(type(v)) in SAFE_REPR_IDS for v in value):
            parts = [safe_repr(v, limit) for v in value]
            text = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        else:
            return None
    except ValueError:  # an int beyond sys.get_int_max_str_digits()
        return f"<int of {value.bit_length()} bits>"
    except Exception:
        return None
    return text if len(text) <= limit else text[: limit - 1] + NOT_READ


def key_text(key):
    """A container key as a label's text (str): a bounded repr of a builtin key, else
    ``<ClassName>`` from its type (never the key's own ``__repr__``/``__str__``/``__format__``:
    a ``str`` subclass that reads ``'model'`` is shown as ``<Name>``, not as ``'model'``)."""
    text = safe_repr(key)
    if text is not None:
        return text
    return "<" + type_name(type(key))[:40] + ">"


def plain_str(value):
    """``value`` when it is an exact ``str``, an exact copy of a ``str`` subclass (str's own
    ``__str__``, never the subclass's), else None."""
    if type(value) is str:
        return value
    if is_a(value, str):
        try:
            return _STR_STR(value)
        except Exception:
            return None
    return None


class Skips:
    """How many objects one inventory left out because reading them would run the user's code
    or failed (``count``), and why (``reasons``: {reason: count}, a few words each)."""

    __slots__ = ("count", "reasons")

    def __init__(self):
        self.count = 0
        self.reasons = {}

    def add(self, reason, n=1):
        """Count ``n`` objects skipped for ``reason`` (str)."""
        self.count += n
        self.reasons[reason] = self.reasons.get(reason, 0) + n

    def fact(self):
        """The inventory's ``unread`` ({"objects": int, "reasons": {str: int}}, at most 16
        reasons)."""
        return {"objects": self.count, "reasons": dict(list(self.reasons.items())[:16])}
