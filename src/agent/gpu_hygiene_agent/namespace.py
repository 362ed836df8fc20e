"""Which user variables are roots, read at a cost bounded by what a cell did, not by the size of
the namespace (issue 31).

A namespace of up to ``LARGE_NAMESPACE`` names is read whole at every cell (``roots``:
``variable_roots``, ``output_roots``; ``fingerprint``). A larger one (``globals().update()`` of
100,000 names) would cost every cell a pass over it: ~3 us a name here, 0.3 s a cell at 100,000
names. The roots themselves are read at every cell: the bound holds for a namespace of mostly
values that can hold nothing (numbers, strings, small lists of them, functions, modules); one of
100,000 arrays or objects is 100,000 roots and still costs a pass over them.

Above ``LARGE_NAMESPACE``, ``NamespaceIndex`` keeps the names whose value can hold something
(the *roots*: a value that is not ``util.inert`` and not one of IPython's names) and, at each
cell, reads again only

- the roots (their bindings; the fingerprint reads one level of their content, as for every
  name of a small namespace);
- the names the cell's source mentions (``tokenize``: not in strings, comments or after a
  ``.``), and the global names (``dis``) used by the code of the functions and ``__main__``
  classes it mentions, two calls deep (``m = YOLO(...)``; ``train()`` appending to a global
  list);
- the names added since the last cell (the dict keeps insertion order: they are its tail);
- the next ``SLICE_NAMES`` names in turn, so that every name is read again within
  ``len(namespace) / SLICE_NAMES`` cells: a name that became a root without the cell
  mentioning it (``exec``, a thread) is found then, or sooner (below).

The whole namespace is read again when the inventory is requested (no cell source), when the
cell's source uses a word that can bind names out of sight (``WHOLE_WORDS``: ``globals``,
``exec``, ``%run``, ``import *``...), when a key is not an exact ``str`` (a lookup by name
could then run a ``str`` subclass's ``__eq__``), and before an inventory reports what a partial
read could have missed (``inventory.Inventory``): a model that no variable names (stale, or
reached by nothing) that the last full read did not find so or whose reference count changed
since, or more CUDA memory that no root reaches than at the last full read; and, while some
model is unnamed, every ``FULL_EVERY`` cells (a name bound by a thread that left the model's
references as they were). A partial read does not make a held model look stale or
unreachable, nor held VRAM look unattributed, for more than ``FULL_EVERY`` cells.

The index holds names (str) only, never a user object between cells: ``pairs`` (the roots with
their values) lives for one inventory and is dropped by ``release``."""

import dis
import io
import itertools
import re
import tokenize
import types

from . import peek, roots
from .util import MISSING

# Namespaces up to this many names are read whole at every cell.
LARGE_NAMESPACE = 2000
# Names read again in turn at each cell of a large namespace (~0.3 ms here).
SLICE_NAMES = 256
# Names at the dict's end read at each cell, beyond those its growth says were added.
TAIL_NAMES = 64
# Characters of a cell's source searched for names; a longer one: the whole namespace.
MAX_SOURCE = 200_000
# Functions (and __main__ classes) whose code is read for the global names a cell reaches.
MAX_CODES = 256
CODE_DEPTH = 2  # calls followed from the cell: f() -> g() -> names g uses
# A partial read of a namespace where some model has no variable holder reads the whole
# namespace at least every this many cells (a thread that bound it out of sight).
FULL_EVERY = 64
IDENTIFIER = re.compile(r"[^\W\d]\w*")
_NOT_ATTRIBUTE = re.compile(r"(?<![.\w])[^\W\d]\w*")
MAX_TOKENIZE = 10_000  # characters of a cell's source read with ``tokenize``
# Names after which any name may have been bound or changed unseen: in a cell's source (not as
# an attribute: ``model.eval()`` is no ``eval``), or as a global name that the code of a
# function it calls uses.
WHOLE_WORDS = frozenset(
    (
        "globals",
        "exec",
        "eval",
        "vars",
        "locals",
        "setattr",
        "delattr",
        "__dict__",
        "__main__",
        "__globals__",
        "f_globals",
        "user_ns",
        "user_global_ns",
        "user_module",
        "run_line_magic",
        "run_cell",
        "get_ipython",
    )
)
# Magics that bind names out of sight (``%run``, ``%store -r``, ``%load``, ``%reset``...).
WHOLE_MAGICS = re.compile(
    r"^\s*%{1,2}\s*(run|rerun|store|load|load_ext|reset|autoreload|macro|recall)\b", re.M
)
_STAR_IMPORT = re.compile(r"\bimport\s*\*")
_CODE = types.FunctionType.__dict__["__code__"]
_FUNCTION = types.FunctionType
_GLOBAL_OPS = frozenset(("LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_NAME", "STORE_NAME"))


def _source_names(source):
    """The names of a cell's ``source`` (frozenset of str): its identifiers outside strings and
    comments and not after a ``.`` (``tokenize``); where it does not tokenize (a magic, an
    unfinished block), every identifier of the text. A source longer than ``MAX_TOKENIZE``
    (tokenize costs ~0.6 ms a KB here) gives every identifier not after a ``.``, without
    tokenizing: more names, a few more whole reads."""
    if len(source) > MAX_TOKENIZE:
        return frozenset(_NOT_ATTRIBUTE.findall(source))
    names = set()
    try:
        dot = False
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.NAME and not dot:
                names.add(token.string)
            dot = token.type == tokenize.OP and token.string == "."
    except (tokenize.TokenError, SyntaxError, ValueError):
        return frozenset(IDENTIFIER.findall(source))
    return frozenset(names)


def mentioned_names(source):
    """The names a cell's ``source`` (str) may bind or use (frozenset of str), or None when
    the whole namespace must be read: no source, a source longer than ``MAX_SOURCE``, a name
    of ``WHOLE_WORDS`` (not as an attribute), ``import *``, a magic of ``WHOLE_MAGICS``."""
    if type(source) is not str or len(source) > MAX_SOURCE:
        return None
    if _STAR_IMPORT.search(source) or WHOLE_MAGICS.search(source):
        return None
    names = _source_names(source)
    return None if names & WHOLE_WORDS else names


def _codes(code):
    """``code`` and the code objects nested in it (functions, lambdas, comprehensions)."""
    stack = [code]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(c for c in current.co_consts if type(c) is types.CodeType)


def _functions_of(value):
    """The Python functions whose code a mention of ``value`` may run: ``value`` itself (a
    plain function, and the one it wraps: ``functools.wraps``' ``__wrapped__``) or the
    functions of a class defined in ``__main__`` (``value`` or its type). Read through the
    types' own dicts and slots: runs no user code."""
    if type(value) is _FUNCTION:
        wrapped = (peek.instance_dict(value) or {}).get("__wrapped__")
        return (value, wrapped) if type(wrapped) is _FUNCTION else (value,)
    cls = value if peek.is_sub(type(value), type) else type(value)
    if peek.type_module(cls) != "__main__":
        return ()
    return tuple(v for v in list(peek.class_dict(cls).values()) if type(v) is _FUNCTION)


def _global_names(code):
    """The global names that ``code`` and the code nested in it read, bind or delete (set of
    str, from ``dis``: ``LOAD_GLOBAL``, ``STORE_GLOBAL``...; attribute names are not)."""
    found = set()
    for nested in _codes(code):
        for instruction in dis.get_instructions(nested):
            if instruction.opname in _GLOBAL_OPS and type(instruction.argval) is str:
                found.add(instruction.argval)
    return found


def reached_names(ns, names):
    """``names`` (frozenset of str) with the global names used by the code of the functions
    and ``__main__`` classes among their values in ``ns``, ``CODE_DEPTH`` calls deep
    (frozenset of str), or None when that code uses a name of ``WHOLE_WORDS`` (``globals()``,
    ``exec``...) or there are more than ``MAX_CODES`` functions: the whole namespace must be
    read. ``ns``'s keys are exact str (checked by the caller): a lookup runs no ``__eq__``."""
    found = set(names)
    frontier = names
    seen = set()
    for _ in range(CODE_DEPTH):
        more = set()
        for name in frontier:
            value = dict.get(ns, name, MISSING)
            if value is MISSING:
                continue
            for fn in _functions_of(value):
                if id(fn) in seen:
                    continue
                if len(seen) >= MAX_CODES:
                    return None
                seen.add(id(fn))
                more |= _global_names(_CODE.__get__(fn))
        if more & WHOLE_WORDS:
            return None
        frontier = more - found
        found |= more
        if not frontier:
            break
    return frozenset(found)


class NamespaceIndex:
    """The roots of a large namespace, kept up to date at a bounded cost (see the module).

    ``refresh(shell, source)`` reads what a cell may have changed (``source``: its text, None:
    everything) and sets ``pairs``; ``active`` tells whether the namespace is large (else
    ``pairs`` is None and the callers read the namespace whole, as before)."""

    def __init__(self):
        self.active = False
        self.roots = {}  # name -> None: the root names, in the namespace's order
        self.cursor = 0  # where the next slice starts in ``keys``
        # the namespace's names (exact str) when this round of slices began: a slice is
        # taken from it (no pass over the dict to reach the cursor); a name added since is
        # read at the cell that added it (the tail) and in the next round
        self.keys = None
        self.size = 0  # len(namespace) at the last refresh
        self.pairs = None  # [(name, value)] of the roots, for one inventory (``release``)
        self.full = False  # whether the last refresh read every name
        self.read = 0  # names read at the last refresh
        self.partial = 0  # partial reads since the last full one
        self.watch = False  # a model no variable names: read whole every FULL_EVERY cells

    def release(self):
        """Drop the values read for one inventory: no user object is kept between cells."""
        self.pairs = None

    def _small(self):
        self.active = False
        self.roots = {}
        self.keys = None

    def refresh(self, shell, source=None):
        """Bring the roots up to date with ``shell.user_ns`` after a cell whose text is
        ``source`` (None: read every name). Sets ``active``, ``pairs``, ``full`` and ``read``."""
        ns = shell.user_ns
        size = len(ns)
        self.pairs = None
        if size <= LARGE_NAMESPACE:
            self._small()
            return
        hidden = roots.hidden_ns(shell)
        names = mentioned_names(source) if self.active else None
        if self.watch and self.partial >= FULL_EVERY:
            names = None
        read = False
        if names is not None:
            try:
                read = self._read_some(shell, ns, hidden, names, size)
            except RuntimeError:  # a thread changed the namespace meanwhile: read it whole
                read = False
        if not read:
            self.active = self._read_all(shell, ns, hidden)
            if not self.active:
                self._small()
        self.size = size

    def _read_all(self, shell, ns, hidden):
        """Read every name; False (and no roots) when a key is not an exact str: a lookup by
        name could run its ``__eq__``, so such a namespace is read whole at every cell by
        ``roots.variable_roots`` (which counts the key among the names it skipped)."""
        found = {}
        pairs = []
        for name, value in list(ns.items()):
            if type(name) is not str:
                return False
            if roots.is_variable(shell, hidden, name, value):
                found[name] = None
                pairs.append((name, value))
        self.roots = found
        self.pairs = pairs
        self.full = True
        self.read = len(ns)
        self.keys = None  # every name was read: the next round starts now
        self.partial = 0
        return True

    def _read_some(self, shell, ns, hidden, names, size):
        """Read the roots, ``names`` (and the names the code they reach uses), the tail and
        the next slice; False (nothing read) when the tail or the slice has a key that is not
        an exact str, or the code reached calls for a whole read."""
        # the tail: the names added since the last cell (the last ``grown`` keys: a dict puts
        # a new key last, also one deleted and bound again), and a few more; taken in one C
        # call each (no thread runs meanwhile), checked before any lookup by name
        grown = max(0, size - self.size)
        tail = list(itertools.islice(reversed(ns), grown + TAIL_NAMES))
        if self.keys is None or self.cursor >= len(self.keys):
            keys = list(ns)
            if any(type(k) is not str for k in keys):
                return False
            self.keys = keys
            self.cursor = 0
        chunk = self.keys[self.cursor : self.cursor + SLICE_NAMES]
        self.cursor += SLICE_NAMES
        if any(type(k) is not str for k in tail):
            return False
        names = reached_names(ns, names)
        if names is None:
            return False
        check = dict.fromkeys(self.roots)
        for group in (names, tail, chunk):
            for name in group:
                check.setdefault(name, None)
        kept = {}
        for name in check:
            value = dict.get(ns, name, MISSING)
            if value is not MISSING and roots.is_variable(shell, hidden, name, value):
                kept[name] = value
        # the roots in the namespace's order (which root a shared object is attributed to
        # follows it): the old ones where they were, then the names this cell added, in order
        added = tail[:grown][::-1]
        fresh = set(added)
        if all(n in self.roots or n in fresh for n in kept):
            order = [n for n in self.roots if n in kept and n not in fresh]
            order.extend(n for n in added if n in kept)
        else:
            # an older name became a root: its place is read from the namespace (one pass
            # over a copy of its keys, only then; a key that is not an exact str is never
            # hashed here)
            order = [k for k in list(ns) if type(k) is str and k in kept]
        self.roots = dict.fromkeys(order)
        self.pairs = [(n, kept[n]) for n in order]
        self.full = False
        self.read = len(check)
        self.partial += 1
        return True
