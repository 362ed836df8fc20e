"""The holder walk: a bounded reference walk from one root object (a user variable, an
output-cache entry, a traceback frame) to the models and tensors it keeps alive, and the paths
that say how (``Walker``), with what one root reaches (``Reach``)."""

import gc
import itertools
import types
from typing import NamedTuple

from . import peek
from .limits import (
    BIG_TENSOR,
    GRAPH_ITEMS,
    MAX_BIG_TENSORS,
    MAX_FRAMES,
    MAX_PATH_DEPTH,
    MAX_PATH_TEXT,
    MAX_TB_DEPTH,
    MEASURED_TENSORS,
    PHASE_EXAMINED,
    PHASE_VISITS,
    ROOT_EXAMINED,
    ROOT_VISITS,
)
from .models import grad_fn, tensor_grad
from .paths import edge_label, tensor_meta
from .util import LEAF_IDS, OPAQUE_TYPES, PLAIN_IDS, frame_name, machinery_frame, short, vars_of

_FUNCTION = types.FunctionType

# What the walk does with an object, by its class (``Walker.kind``): report a tensor, report a
# tensor of a class with ``__torch_dispatch__`` and enter its attributes (such a wrapper subclass
# keeps its data there), report (and maybe expand) a module, never enter it, enter only the start
# frame or traceback, enter.
_KIND_TENSOR = "tensor"
_KIND_WRAPPER = "wrapper"
_KIND_MODULE = "module"
_KIND_OPAQUE = "opaque"
_KIND_FRAME = "frame"
_KIND_OTHER = "other"


class ReachedModule(NamedTuple):
    """A module a root reaches."""

    module: object
    path: str  # path suffix from the root (``".trainer.model"``)
    via: object  # the expanded model above it on the path, or None
    rel: str  # path suffix from ``via`` ("" without one)


class Group(NamedTuple):
    """What a tensor under a model hangs off: the object right below the model (or the
    optimizer above the tensor)."""

    obj: object
    path: str  # path suffix from the model


class BigTensor(NamedTuple):
    """A tensor of at least ``BIG_TENSOR`` bytes, named to be reported one by one."""

    path: str  # path suffix from the root
    meta: dict  # ``paths.tensor_meta``


class ReachedStorage(NamedTuple):
    """One storage a root reaches (the first tensor of it the walk met)."""

    nbytes: int
    via: object  # id of the model whose plain attributes led to the tensor, or None
    group: object  # Group under that model, or None
    big: object  # BigTensor, or None


class KeptByError(NamedTuple):
    """How a stored exception keeps a storage: through a frame of its traceback."""

    error: object  # the exception (kept for the census only; dropped with the walk)
    path: str  # path suffix from the root to the exception ("" when the root is it)
    frame: str  # the frame's function name (``util.frame_name``)
    local: str  # path suffix from the frame to the tensor (".acts", ".out[0]")


class _Walked(NamedTuple):
    root: object  # the root (kept for the inventory, so that its id stays its own)
    reach: object  # its Reach


class Reach:
    """What one root reaches (filled by ``Walker.reach``).

    ``modules``: [ReachedModule]; ``storages``: {StorageKey: ReachedStorage}; ``complete``:
    False when a bound cut the walk; ``big``: how many storages carry a ``BigTensor`` (at most
    ``MAX_BIG_TENSORS``); ``tensors``: ids of the tensors reached (also those left unmeasured),
    while the walk runs (a re-check of the models they belong to: ``census.recheck``);
    ``errors``: {StorageKey: KeptByError} of the storages reached through the traceback of an
    exception the root holds (a caught error kept in a variable), empty nearly always;
    ``graphs``: the tensors with a ``grad_fn`` reached (at most ``GRAPH_ITEMS``, ``graphs_cut``
    past it), wherever they hang (an attribute, a nested container, the root itself), for the
    graph holders (``graphs.graph_holders``); ``graph_path``: the path suffix of the one object
    that holds them all (the tensor itself when there is one, its container when they share
    one, else ``""``: the root); ``graph_direct``: each is the root or an item of it;
    ``root_id``: ``id()`` of the root; ``root_plain``: its exact type's name when it is a tensor,
    list, tuple, dict or set.
    """

    __slots__ = (
        "big",
        "complete",
        "errors",
        "graph_direct",
        "graph_homes",
        "graph_path",
        "graphs",
        "graphs_cut",
        "modules",
        "root_id",
        "root_plain",
        "storages",
        "tensors",
    )

    def __init__(self, root_id=None):
        self.modules = []
        self.storages = {}
        self.tensors = set()
        self.errors = {}
        self.complete = True
        self.big = 0
        self.graphs = []
        self.graph_homes = set()
        self.graph_path = ""
        self.graph_direct = True  # every graph tensor is the root or a direct item of it
        self.graphs_cut = False  # more than GRAPH_ITEMS graph tensors: the rest not listed
        self.root_id = root_id
        self.root_plain = None  # "tensor", "list", "tuple", "dict", "set" or None (another type)


class Walker:
    """Bounded reference walk from root objects.

    It stops at tensors and at ``torch.nn.Module`` instances (reported through callbacks);
    a tensor whose class defines ``__torch_dispatch__`` is reported and its instance
    attributes walked too (such a wrapper subclass has no storage of its own: its data is the
    tensors it keeps there, ``storage.inner_tensors``). It never enters Python modules,
    classes, code, descriptors, weak references, frames or tracebacks other than the start
    object and the frames of a reached exception's traceback (a caught error kept in a
    variable keeps them, and their locals, alive; IPython's own frames left out), or the
    objects in ``skip_ids`` (the user namespace, module ``__dict__``s, IPython's
    machinery...). For functions it follows only closure cells and defaults, for bound
    methods ``__self__`` and ``__func__``. Frames are read with ``gc.get_referents`` (never
    ``f_locals``, which would snapshot the locals) and their ``f_back`` is not followed.

    Bounds: per root ``ROOT_VISITS`` objects expanded and ``ROOT_EXAMINED`` references looked
    at; per phase (user variables, output cache, last traceback: see ``start_phase``)
    ``PHASE_VISITS`` and ``PHASE_EXAMINED``; per inventory ``MEASURED_TENSORS`` tensors measured
    by ``reach``. Hitting one sets ``truncated``.

    ``parents`` maps every object of the current walk to the object it was reached from, so
    that ``path`` can name how a found module or tensor is held (``.trainer.ema.ema``,
    ``['a'][1]``); names are computed only for what is reported.
    """

    def __init__(self, tensor_type, module_type, skip_ids):
        self.tensor_type = tensor_type
        # torch.Tensor's own __torch_dispatch__ (the disabled one), which a wrapper overrides
        self.no_dispatch = (
            peek.static_class_attr(tensor_type, "__torch_dispatch__")
            if tensor_type is not None
            else peek.MISSING
        )
        self.module_type = module_type
        self.skip_ids = skip_ids
        self.truncated = False
        self.expand_module = None  # callable(module) -> bool: also walk its plain attributes
        self.module_internals = frozenset()  # nn.Module's own __dict__ keys, never walked
        self.visits = 0  # whole inventory, for the record
        self._phase_visits = 0
        self._phase_examined = 0
        self._reached = {}  # id(root) -> _Walked, of walks from roots
        self.parents = {}  # id(object) -> the object it was reached from (None: the start)
        self.measured = 0  # tensors measured by ``reach`` (bounded by MEASURED_TENSORS)
        self._kinds = {}  # id(class) -> (class, its _KIND_*): see ``kind``
        # id(frame) -> frame: the traceback frames of the exceptions the current walk reached
        self.error_frames = {}

    def start_phase(self):
        """Give the next group of roots a fresh phase budget."""
        self._phase_visits = 0
        self._phase_examined = 0

    def reach(self, root, tensor_bytes, optimizer_type=None):
        """What ``root`` reaches (a ``Reach``); a root walked before is not walked again.

        ``tensor_bytes(tensor)`` -> ``storage.Measured`` or None (unmeasurable);
        ``optimizer_type``: ``torch.optim.Optimizer`` (tensors under one are optimizer state).
        """
        cached = self._reached.get(id(root))
        if cached is not None and cached.root is root:
            return cached.reach
        found = Reach(id(root))
        cls = type(root)
        # identity only: ``cls in (...)`` would call a user metaclass's ``__eq__``
        if cls is list or cls is tuple or cls is dict or cls is set:
            found.root_plain = cls.__name__
        elif self.tensor_type is not None and issubclass(cls, self.tensor_type):
            found.root_plain = "tensor"
        module_type = self.module_type

        def on_module(module):
            via = self.ancestor(module, module_type)
            rel = self.path(module, via) if via is not None else ""
            found.modules.append(ReachedModule(module, self.path(module), via, rel))

        def on_tensor(tensor):
            found.tensors.add(id(tensor))
            if grad_fn(tensor) is not None:
                if len(found.graphs) < GRAPH_ITEMS:
                    self.note_graph(found, tensor, root)
                else:
                    found.graphs_cut = True
            if self.measured >= MEASURED_TENSORS:
                self.truncated = True  # roots' bytes are lower bounds from here on
                return
            self.measured += 1
            measured = tensor_bytes(tensor)
            if measured is None:
                return
            key = measured.key
            if key in found.storages:
                return
            if self.error_frames:
                kept = self.kept_by_error(tensor)
                if kept is not None:
                    found.errors[key] = kept
            nbytes = measured.nbytes
            via = self.ancestor(tensor, module_type)
            group = None
            if via is not None:
                group = self.ancestor(tensor, optimizer_type, below=via) if optimizer_type else None
                group = group if group is not None else self.first_hop(tensor, via)
            big = nbytes >= BIG_TENSOR and found.big < MAX_BIG_TENSORS
            if big:
                found.big += 1
            found.storages[key] = ReachedStorage(
                nbytes,
                id(via) if via is not None else None,
                Group(group, self.path(group, via)) if group is not None else None,
                BigTensor(self.path(tensor), tensor_meta(tensor)) if big else None,
            )
            if via is None:
                # a parameter outside any model (an optimizer's, after ``del model``) keeps
                # its gradient: the same holder keeps both
                grad = tensor_grad(tensor)
                if grad is not None:
                    measured = tensor_bytes(grad)
                    if measured is not None and measured.key not in found.storages:
                        found.storages[measured.key] = ReachedStorage(
                            measured.nbytes, None, None, None
                        )
                        if key in found.errors:
                            found.errors[measured.key] = found.errors[key]

        found.complete = self.walk(root, on_module, on_tensor)
        self._reached[id(root)] = _Walked(root, found)
        return found

    def note_graph(self, found, tensor, root):
        """Add ``tensor`` (one with a ``grad_fn``) to ``found.graphs`` and keep
        ``found.graph_path`` the path of the one object holding them all, ``graph_direct``
        whether each is ``root`` or one of its items."""
        home = self.parents.get(id(tensor))
        if tensor is not root and home is not root:
            found.graph_direct = False
        homes = found.graph_homes
        if not found.graphs:
            found.graph_path = self.path(tensor)
        elif id(home) not in homes:
            found.graph_path = ""  # held in two places: the root is what holds them all
        elif len(found.graphs) == 1:
            found.graph_path = self.path(home) if home is not None else ""
        homes.add(id(home))
        found.graphs.append(tensor)

    # ---- paths: only valid during the walk that reached the object (``parents``)

    def chain(self, obj, limit=MAX_PATH_DEPTH):
        """Objects from the walk's start down to ``obj`` (list), at most ``limit`` long (the
        start is left out of a cut chain)."""
        parents = self.parents
        out = [obj]
        current = parents.get(id(obj))
        while current is not None and len(out) < limit:
            out.append(current)
            current = parents.get(id(current))
        out.reverse()
        return out

    def ancestor(self, obj, cls, below=None):
        """The nearest object above ``obj`` on its walk path that is an instance of ``cls``,
        stopping at ``below`` (exclusive), or None."""
        if cls is None:
            return None
        parents = self.parents
        current = parents.get(id(obj))
        hops = 0
        while current is not None and current is not below and hops < MAX_PATH_DEPTH:
            if peek.is_a(current, cls):
                return current
            current = parents.get(id(current))
            hops += 1
        return None

    def kept_by_error(self, obj):
        """The ``KeptByError`` through which the current walk reached ``obj``: the nearest
        traceback frame above it that a reached exception keeps, or None."""
        frames = self.error_frames
        parents = self.parents
        current = parents.get(id(obj))
        hops = 0
        while current is not None and hops < MAX_PATH_DEPTH:
            if id(current) in frames and frames[id(current)] is current:
                error = parents.get(id(current))
                return KeptByError(
                    error,
                    self.path(error) if error is not None else "",
                    frame_name(current.f_code),
                    self.path(obj, current),
                )
            current = parents.get(id(current))
            hops += 1
        return None

    def first_hop(self, obj, top):
        """The object right below ``top`` on the walk path to ``obj`` (``obj`` itself when it
        hangs directly off ``top``)."""
        previous = obj
        current = self.parents.get(id(obj))
        hops = 0
        while current is not None and current is not top and hops < MAX_PATH_DEPTH:
            previous = current
            current = self.parents.get(id(current))
            hops += 1
        return previous

    def path(self, obj, start=None):
        """Path suffix (str) from the walk's start, or from ``start`` on the path, to ``obj``:
        ``".trainer.ema.ema"``, ``"[0]"``, ``"['loss']"``; ``""`` for the start itself."""
        chain = self.chain(obj)
        cut = self.parents.get(id(chain[0])) is not None
        if start is not None:
            for i, item in enumerate(chain):
                if item is start:
                    chain = chain[i:]
                    break
        labels = ["\u2026"] if cut and start is None else []  # a chain cut by the depth bound
        for i in range(1, len(chain)):
            grand = chain[i - 2] if i >= 2 else None
            labels.append(edge_label(chain[i - 1], chain[i], grand))
        return short("".join(labels), MAX_PATH_TEXT)

    # ---- the walk itself

    def kind(self, cls):
        """What the walk does with an instance of ``cls`` (one of the ``_KIND_*``), looked up
        once per class and walker (the walker keeps the class while it lives, so that its id
        stays its own): three ``issubclass`` calls per object otherwise."""
        entry = self._kinds.get(id(cls))
        if entry is not None:
            return entry[1]
        if self.tensor_type is not None and issubclass(cls, self.tensor_type):
            dispatch = peek.static_class_attr(cls, "__torch_dispatch__")
            kind = _KIND_TENSOR if dispatch is self.no_dispatch else _KIND_WRAPPER
        elif self.module_type is not None and issubclass(cls, self.module_type):
            kind = _KIND_MODULE
        elif issubclass(cls, OPAQUE_TYPES):
            kind = _KIND_OPAQUE
        elif cls is types.FrameType or cls is types.TracebackType:
            kind = _KIND_FRAME
        else:
            kind = _KIND_OTHER
        self._kinds[id(cls)] = (cls, kind)
        return kind

    def walk(self, start, on_module, on_tensor):
        """Walk from ``start``; calls ``on_module(module)`` / ``on_tensor(tensor)`` once per
        object reached. Returns False when a bound cut the walk short."""
        skip_ids = self.skip_ids
        kinds = self._kinds
        kind_of = self.kind
        seen = self.parents = {id(start): None}
        error_frames = self.error_frames = {}
        stack = [start]
        push = stack.append
        visits = 0
        examined = 0
        while stack:
            obj = stack.pop()
            cls = type(obj)
            if id(cls) in LEAF_IDS:
                continue
            if (
                cls is _FUNCTION
                and obj.__closure__ is None
                and obj.__defaults__ is None
                and obj.__kwdefaults__ is None
            ):
                # a plain function (a library's callbacks): nothing the walk follows, so no
                # visit is spent on it (a YOLO model's callbacks are ~25 of them)
                continue
            entry = kinds.get(id(cls))
            kind = entry[1] if entry is not None else kind_of(cls)
            if kind is _KIND_TENSOR:
                on_tensor(obj)
                continue
            if kind is _KIND_WRAPPER:
                on_tensor(obj)  # then its attributes, below
            if kind is _KIND_MODULE:
                on_module(obj)
                expand = self.expand_module
                if expand is None or not expand(obj):
                    continue
                internals = self.module_internals
                refs = [v for k, v in list(vars_of(obj).items()) if k not in internals]
                if visits >= ROOT_VISITS or self._phase_visits >= PHASE_VISITS:
                    self.truncated = True
                    return False
                visits += 1
                self.visits += 1
                self._phase_visits += 1
                examined += len(refs)
                self._phase_examined += len(refs)
                for ref in refs:
                    if id(type(ref)) not in LEAF_IDS and id(ref) not in seen:
                        seen[id(ref)] = obj
                        push(ref)
                continue
            if kind is _KIND_OPAQUE or id(obj) in skip_ids:
                continue
            if kind is _KIND_FRAME and obj is not start and id(obj) not in error_frames:
                continue
            if visits >= ROOT_VISITS or self._phase_visits >= PHASE_VISITS:
                self.truncated = True
                return False
            visits += 1
            self.visits += 1
            self._phase_visits += 1
            limit = ROOT_EXAMINED - examined
            phase_limit = PHASE_EXAMINED - self._phase_examined
            if phase_limit < limit:
                limit = phase_limit
            if (cls is list or cls is tuple) and len(obj) <= limit:
                refs = list(obj)  # what _referents returns for them, without the call
            else:
                left = min(ROOT_VISITS - visits, PHASE_VISITS - self._phase_visits)
                refs = self._referents(obj, cls, limit, left)
            examined += len(refs)
            self._phase_examined += len(refs)
            for ref in refs:
                if id(type(ref)) in LEAF_IDS:
                    continue
                key = id(ref)
                if key in seen:
                    continue
                seen[key] = obj
                push(ref)
            spent = examined >= ROOT_EXAMINED or self._phase_examined >= PHASE_EXAMINED
            if spent and stack:
                self.truncated = True
                return False
        return True

    def _traceback_frames(self, error):
        """The frames of ``error``'s own traceback (list, outermost first, at most
        ``MAX_FRAMES``; IPython's and ipykernel's own left out), noted in ``error_frames`` so
        that the walk enters them. The traceback is read through BaseException's slot."""
        frames = []
        tb = peek.exc_link(error, "__traceback__")
        depth = 0
        while type(tb) is types.TracebackType and depth < MAX_TB_DEPTH and len(frames) < MAX_FRAMES:
            frame = tb.tb_frame
            if not machinery_frame(frame):
                frames.append(frame)
                self.error_frames[id(frame)] = frame
            tb = tb.tb_next
            depth += 1
        return frames

    def _referents(self, obj, cls, limit, visits_left=ROOT_VISITS):
        """What ``obj`` refers to, by the rules of the class docstring (list, at most about
        ``limit`` items; a cut sets ``truncated``). Of a container too large for ``limit``
        only the first non-leaf items that the ``visits_left`` can still expand are returned
        (looking at no more than four times as many items)."""
        if cls is types.FunctionType:
            out = list(obj.__closure__ or ())
            if obj.__defaults__:
                out.append(obj.__defaults__)
            if obj.__kwdefaults__:
                out.append(obj.__kwdefaults__)
            return out
        if cls is types.MethodType:
            return [obj.__self__, obj.__func__]
        if cls is types.CellType:
            try:
                return [obj.cell_contents]
            except ValueError:
                return []
        if cls is types.FrameType:
            return [r for r in gc.get_referents(obj) if type(r) is not types.FrameType]
        if cls is types.TracebackType:
            return []  # frames are walked one by one by the caller
        if id(cls) in PLAIN_IDS:
            size = len(obj) * (2 if cls is dict else 1)
            if size > limit:
                # a huge container: look at its first items only (no full copy), and keep no
                # more of them than the walk can still expand
                self.truncated = True
                it = itertools.chain.from_iterable(obj.items()) if cls is dict else iter(obj)
                left = max(min(visits_left, limit), 0)
                head = itertools.islice(it, min(limit, 4 * left))
                return list(
                    itertools.islice((x for x in head if id(type(x)) not in LEAF_IDS), left)
                )
            if cls is dict:
                return [*obj.keys(), *obj.values()]
            return list(obj)
        if issubclass(cls, BaseException):
            # the traceback itself is not entered: the frames it keeps are walked one by one
            refs = [r for r in gc.get_referents(obj) if type(r) is not types.TracebackType]
            refs.extend(self._traceback_frames(obj))
            return refs
        refs = gc.get_referents(obj)
        if len(refs) > limit:
            self.truncated = True
            del refs[max(limit, 0) :]
        return refs
