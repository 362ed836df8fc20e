"""Which user variables are roots, read at a cost bounded by what a cell did, not by the size of
the namespace (issue 31).

A namespace of up to ``LARGE_NAMESPACE`` names is read whole at every cell (``roots``:
``variable_roots``, ``output_roots``; ``fingerprint``). A larger one (``globals().update()`` of
100,000 names, a variable per file of a dataset) would cost every cell a pass over it: ~3 us a
name here, 0.3 s a cell at 100,000 names. Above it, ``NamespaceIndex`` keeps the names whose
value can hold something (the *roots*: a value that is not ``util.inert`` and not one of
IPython's names) and, at each cell, reads again only

- the roots (their bindings; the fingerprint reads one level of their content, as for every
  name of a small namespace);
- the names the cell's source mentions, and the global names used by the code of the functions
  and ``__main__`` classes it mentions, two calls deep (``m = YOLO(...)``; ``train()``
  appending to a global list);
- the names added since the last cell (the dict keeps insertion order: they are its tail);
- the next ``SLICE_NAMES`` names in turn, so that every name is read again within
  ``len(namespace) / SLICE_NAMES`` cells: a name that became a root without the cell
  mentioning it (``exec``, a thread) is found then, or sooner (below).

The whole namespace is read again when the inventory is requested (no cell source), when the
cell's source uses a word that can bind names out of sight (``WHOLE_WORDS``: ``globals``,
``exec``, ``%run``, ``import *``...), when a key is not an exact ``str`` (a lookup by name
could then run a ``str`` subclass's ``__eq__``), and before an inventory reports what a partial
read could have missed (``inventory.Inventory``): a model that no root reaches, or more CUDA
memory that no root reaches than at the last full read. So a partial read never makes a held
model look unreachable, nor held VRAM look unattributed.

The index holds names (str) only, never a user object between cells: ``pairs`` (the roots with
their values) lives for one inventory and is dropped by ``release``."""

import itertools
import re
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
IDENTIFIER = re.compile(r"[^\W\d]\w*")
# Words of a cell's source after which any name may have been bound or changed unseen.
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
        "run",
        "run_line_magic",
        "run_cell",
        "store",
        "load",
        "load_ext",
        "autoreload",
        "reset",
        "user_ns",
        "push",
    )
)
_STAR_IMPORT = re.compile(r"\bimport\s*\*")
_CODE = types.FunctionType.__dict__["__code__"]
_FUNCTION = types.FunctionType


def mentioned_names(source):
    """The names a cell's ``source`` (str) may bind or use (frozenset of str: its identifiers),
    or None when the whole namespace must be read (no source, a source longer than
    ``MAX_SOURCE``, a word of ``WHOLE_WORDS`` or ``import *``)."""
    if type(source) is not str or len(source) > MAX_SOURCE or _STAR_IMPORT.search(source):
        return None
    names = frozenset(IDENTIFIER.findall(source))
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
    plain function) or the functions of a class defined in ``__main__`` (``value`` or its
    type). Read through the type's own dicts: runs no user code."""
    if type(value) is _FUNCTION:
        return (value,)
    cls = value if peek.is_sub(type(value), type) else type(value)
    if peek.type_module(cls) != "__main__":
        return ()
    return tuple(v for v in list(peek.class_dict(cls).values()) if type(v) is _FUNCTION)


def reached_names(ns, names):
    """``names`` (frozenset of str) with the global names used by the code of the functions
    and ``__main__`` classes among their values in ``ns``, ``CODE_DEPTH`` calls deep and
    ``MAX_CODES`` functions at most (frozenset of str)."""
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
                if id(fn) in seen or len(seen) >= MAX_CODES:
                    continue
                seen.add(id(fn))
                for code in _codes(_CODE.__get__(fn)):
                    more.update(n for n in code.co_names if type(n) is str)
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

    def release(self):
        """Drop the values read for one inventory: no user object is kept between cells."""
        self.pairs = None

    def refresh(self, shell, source=None):
        """Bring the roots up to date with ``shell.user_ns`` after a cell whose text is
        ``source`` (None: read every name). Sets ``active``, ``pairs``, ``full`` and ``read``."""
        ns = shell.user_ns
        size = len(ns)
        self.pairs = None
        if size <= LARGE_NAMESPACE:
            self.active = False
            self.roots = {}
            return
        hidden = roots.hidden_ns(shell)
        names = mentioned_names(source) if self.active else None
        if names is None or not self._read_some(shell, ns, hidden, reached_names(ns, names), size):
            self.active = self._read_all(shell, ns, hidden)
        self.size = size

    def _read_all(self, shell, ns, hidden):
        """Read every name; False (and no roots) when a key is not an exact str: a lookup by
        name could run its ``__eq__``, so such a namespace is read whole at every cell by
        ``roots.variable_roots`` (which counts the key among the names it skipped)."""
        found = {}
        pairs = []
        for name, value in list(ns.items()):
            if type(name) is not str:
                self.roots = {}
                return False
            if roots.is_variable(shell, hidden, name, value):
                found[name] = None
                pairs.append((name, value))
        self.roots = found
        self.pairs = pairs
        self.full = True
        self.read = len(ns)
        self.keys = None  # every name was read: the next round starts now
        return True

    def _read_some(self, shell, ns, hidden, names, size):
        """Read the roots, ``names``, the tail and the next slice; False (nothing read) when
        the tail or the slice has a key that is not an exact str."""
        # the tail: the names added since the last cell (the last ``grown`` keys: a dict puts
        # a new key last, also one deleted and bound again), and a few more
        grown = max(0, size - self.size)
        tail = list(itertools.islice(reversed(ns), grown + TAIL_NAMES))
        if self.keys is None or self.cursor >= len(self.keys):
            self.keys = list(ns)
            self.cursor = 0
        chunk = self.keys[self.cursor : self.cursor + SLICE_NAMES]
        self.cursor += SLICE_NAMES
        if any(type(k) is not str for k in tail) or any(type(k) is not str for k in chunk):
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
            # over the keys, only then; every key was an exact str at the last full read,
            # and one that is not is never hashed here)
            order = [k for k in ns if type(k) is str and k in kept]
        self.roots = dict.fromkeys(order)
        self.pairs = [(n, kept[n]) for n in order]
        self.full = False
        self.read = len(check)
        return True
