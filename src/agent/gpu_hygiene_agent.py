"""Kernel-side agent of jupyterlab-gpu-hygiene (comm protocol 2, see docs/protocol.md).

The browser sends this file as text and runs it through ``src/agent/loader.py`` in a silent
execute request. It lives in its own module object ``_jupyterlab_gpu_hygiene_agent`` in
``sys.modules`` and never binds a name in the user namespace.

What it does:

- registers the comm target ``jupyterlab_gpu_hygiene.v1``; every open comm gets ``hello``,
  ``inventory``, the ``sample`` stream of the sampler thread, ``cleaned`` and ``error``;
- a daemon thread ("gpu-hygiene-sampler") pushes device memory figures (NVML through
  ``pynvml`` when importable, torch's caching allocator when torch is imported *and* CUDA is
  already initialised) every ``sampleIntervalMs``, also while a cell runs;
- an IPython ``post_run_cell`` hook sends an inventory of the live top-level
  ``torch.nn.Module`` instances and of who holds them (user variables, the output cache, the
  last traceback, or nothing reachable), and the tensors kept by the last traceback;
- a ``pre_run_cell`` hook marks the kernel busy and, for a cell containing the marker
  ``# gpu-hygiene: clear_gpu``, snapshots the models so that a ``cleaned`` message can say
  what the cell freed.

Rules it keeps: stdlib only at import time; it never imports torch, ultralytics or anything
that would create a CUDA context; it never prints and never lets an exception reach a user
cell (errors become ``error`` messages, each distinct one sent once per comm); it keeps no
strong reference to a user object between cells. All memory figures are bytes (int).
"""

import contextlib
import gc
import itertools
import os
import re
import sys
import threading
import time
import types
import weakref

AGENT_VERSION = "0.2.0"
PROTOCOL = 2
MODULE_NAME = "_jupyterlab_gpu_hygiene_agent"
COMM_TARGET = "jupyterlab_gpu_hygiene.v1"
THREAD_NAME = "gpu-hygiene-sampler"
CLEAN_MARKER = "# gpu-hygiene: clear_gpu"
MIN_INTERVAL_MS = 250
DEFAULT_INTERVAL_MS = 1000
# Bounds of the holder walk (see Walker): objects expanded and references looked at, per root
# and per phase (user variables, output cache, last traceback are one phase each).
ROOT_VISITS = 5000
ROOT_EXAMINED = 200000
PHASE_VISITS = 20000
PHASE_EXAMINED = 1000000
MAX_PENDING_ERRORS = 32
MAX_TB_DEPTH = 1000  # traceback entries followed per traceback (RecursionError...)
# Message bounds, below what the browser accepts (src/protocol.ts): frames and models per
# inventory, characters per string. What is cut is said with ``truncated``.
MAX_FRAMES = 500
MAX_MODELS = 2000
MAX_TEXT = 500
MAX_HOLDERS = 100  # holder names reported per model
MAX_PATH_DEPTH = 40  # hops of a reported path
MAX_PATH_TEXT = 300  # characters of a path suffix
MAX_LABEL_SCAN = 10000  # container items searched to name one hop of a path
BIG_TENSOR = 1 << 20  # loose tensors from this size (bytes) are reported one by one
MAX_BIG_TENSORS = 200  # per root walk, to name them; the inventory reports the largest
MAX_TENSORS = 20  # loose tensors per inventory
MEASURED_TENSORS = 20000  # tensors measured per inventory (about 3 us each)
MAX_PARTS = 50  # parts per model
MAX_GRAPH_HOLDERS = 50
MAX_ROOTS = 200  # roots reported per inventory, largest first
GRAPH_ITEMS = 10000  # container items looked at per graph holder
GRAPH_ITEMS_TOTAL = 50000  # container items looked at for graph holders per inventory
GRAPH_NODES = 20000  # autograd nodes visited per inventory
FINGERPRINT_ITEMS = 1000  # items of a container / attributes of an object fingerprinted one by one

HIDDEN_HOLDER = "unreachable from the namespace"
UNKNOWN_HOLDER = "not found: the walk bound was hit"

# Output-cache names: _, __, ___ and _<n>.
_OUTPUT_NAME = re.compile(r"_{1,3}$|_\d+$")
# IPython's own names in user_ns that are never user variables.
_SYSTEM_NAME = re.compile(r"_i{1,3}$|_i\d+$|_ih$|_oh$|_dh$|In$|Out$|exit$|quit$|get_ipython$")

_LEAF_TYPES = frozenset(
    (str, bytes, bytearray, int, float, complex, bool, type(None), range, type(Ellipsis))
)
# Never entered: Python modules, classes, code, builtins and descriptors, weak references.
_OPAQUE_TYPES = (
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
_PLAIN_CONTAINERS = (list, tuple, dict, set, frozenset)
# ModuleType's own __dict__ descriptor: a module's namespace without its __getattr__, a
# subclass's property, or gc.get_referents (see Agent._module_dict_ids)
_MODULE_DICT = types.ModuleType.__dict__["__dict__"]
_MISSING = object()

_agent = None  # the running Agent of this module object, or None
_install_errors = []  # strings: install failures that no comm has seen yet


# --------------------------------------------------------------------------------------------
# small helpers


def _describe(exc):
    """One line ``"Type: message"`` for an exception (str, at most 500 characters)."""
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable>"
    first = text.splitlines()[0] if text else ""
    return (type(exc).__name__ + (": " + first if first else ""))[:500]


def _short(value, limit=MAX_TEXT):
    """``value`` as a str of at most ``limit`` characters (the browser rejects longer ones)."""
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _output_cache(shell):
    """IPython's output cache dict (``Out``), also after the user deleted the name ``Out``."""
    cache = getattr(getattr(shell, "history_manager", None), "output_hist", None)
    return cache if type(cache) is dict else shell.user_ns.get("Out", {})


def _is_output_name(shell, name, value):
    """Whether ``name`` is an output-cache name holding ``value``: ``_``, ``__``, ``___``, or
    ``_<n>`` while it is still ``Out[n]`` (a user's own ``_7 = ...`` is a variable)."""
    if not _OUTPUT_NAME.match(name):
        return False
    if name in ("_", "__", "___"):
        return True
    cache = _output_cache(shell)
    try:
        return cache.get(int(name[1:]), _MISSING) is value
    except Exception:
        return False


def _vars(obj):
    """The instance ``__dict__`` of ``obj`` without running its class's attribute hooks
    (dict, or an empty dict when it has none)."""
    try:
        d = object.__getattribute__(obj, "__dict__")
    except Exception:
        return {}
    return d if type(d) is dict else {}


def _torch():
    """The already-imported torch module, or None. Never imports it, and never hands out a
    torch that is still being imported (another thread must not touch a half-built module)."""
    mod = sys.modules.get("torch")
    if mod is None or not isinstance(mod, types.ModuleType):
        return None
    spec = getattr(mod, "__spec__", None)
    if spec is not None and getattr(spec, "_initializing", False):
        return None
    return mod


def _cuda_initialized(torch):
    """Whether torch's CUDA state is initialised (bool). Creates no CUDA context."""
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:
        return False


def cuda_visible_nvml_indices(env_value, nvml_uuids):
    """Map CUDA device indices to NVML device indices, following ``CUDA_VISIBLE_DEVICES``.

    ``env_value``: the variable's value (str) or None when unset. ``nvml_uuids``: list of the
    NVML devices' UUID strings, by NVML index (length = NVML device count).
    Returns a list of NVML indices; position ``i`` is CUDA device ``i``. Entries are integer
    indices or UUIDs (``GPU-...``, a unique prefix is enough); like CUDA, the list ends at the
    first entry that is invalid, unknown or repeated. NVML and CUDA are assumed to enumerate
    devices in the same (PCI bus) order, which is CUDA's order with
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and in practice on single-model machines.
    """
    count = len(nvml_uuids)
    if env_value is None:
        return list(range(count))
    result = []
    for token in env_value.split(","):
        token = token.strip()
        if not token:
            break
        if re.fullmatch(r"[+-]?\d+", token):
            index = int(token)
            if index < 0 or index >= count:
                break
        else:
            wanted = token if token.upper().startswith(("GPU-", "MIG-")) else "GPU-" + token
            matches = [i for i, uuid in enumerate(nvml_uuids) if uuid and uuid.startswith(wanted)]
            if len(matches) != 1:
                break
            index = matches[0]
        if index in result:
            break
        result.append(index)
    return result


_STORAGES = {}  # id(tensor) -> (weakref to it, tensor.data_ptr(), storage key, nbytes)
MAX_CACHED_STORAGES = 200000


def _measure(tensor):
    """(storage key, nbytes) of a tensor's storage, the key being (device str, data_ptr);
    None for meta tensors and empty storages. Raises what torch raises for a tensor without
    a storage (sparse layouts, some subclasses).

    Answers are cached under a weak reference to the tensor and re-checked against
    ``tensor.data_ptr()`` (0.3 us instead of the 2 us of ``untyped_storage()``): a tensor
    whose data moved (``.data =``, ``set_``, a resize that reallocated) is measured again."""
    ptr = tensor.data_ptr()
    cached = _STORAGES.get(id(tensor))
    if cached is not None and cached[1] == ptr and cached[0]() is tensor:
        return cached[2], cached[3]
    device = tensor.device
    if device.type == "meta":
        return None
    storage = tensor.untyped_storage()
    base = storage.data_ptr()
    nbytes = int(storage.nbytes())
    if base == 0 or nbytes == 0:
        return None
    key = (str(device), base)
    if len(_STORAGES) >= MAX_CACHED_STORAGES:
        _STORAGES.clear()
    try:  # noqa: SIM105 -- hot path, cheaper than contextlib.suppress
        _STORAGES[id(tensor)] = (weakref.ref(tensor), ptr, key, nbytes)
    except TypeError:
        pass  # a tensor type without weak references: not cached
    return key, nbytes


def _storage_of(tensor):
    """``_measure(tensor)``, or None when torch cannot measure it. Never raises."""
    try:
        return _measure(tensor)
    except Exception:
        return None


def _add_storage(tensor, storages):
    """Record the storage of ``tensor`` in ``storages`` ({(device str, data_ptr): nbytes}).

    Meta tensors and empty storages are skipped. Raises what torch raises for tensors without
    a storage (sparse layouts, some subclasses); callers catch.
    """
    measured = _measure(tensor)
    if measured is not None:
        storages[measured[0]] = measured[1]


def _bytes_by_device(storages):
    """Sum {(device, ptr): nbytes} into {device: bytes}."""
    out = {}
    for (device, _ptr), nbytes in storages.items():
        out[device] = out.get(device, 0) + nbytes
    return out


def _basename(value):
    """File name of a str/os.PathLike, or None for anything else."""
    try:
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if isinstance(value, str) and value:
            return os.path.basename(value.rstrip("/\\")) or value
    except Exception:
        pass
    return None


# --------------------------------------------------------------------------------------------
# torch module tracking


class ModuleTracker:
    """Weak registry of ``torch.nn.Module`` instances, fed by torch's global registration hooks.

    Modules are keyed by ``id()`` with a weak reference and a creation order (int, smaller =
    older). A plain ``WeakKeyDictionary`` would hash and compare user modules (a subclass may
    define ``__eq__``/``__hash__``, even raising ones, and the hooks run inside the user's
    constructors), so identity keys are used instead; a weakref callback removes dead entries.
    """

    def __init__(self):
        self._refs = {}  # id(module) -> (weakref, order)
        self._counter = itertools.count()
        self._handles = []
        self.active = False  # registration hooks installed
        self.rescan_each_time = False  # torch without registration hooks: scan per inventory
        self.changes = 0  # modules added or gone so far (int): equal counts, same tracked set
        # registration events seen (int): submodules, parameters and buffers set on a module;
        # equal counts, no module tree changed through __setattr__ / register_*
        self.structure = 0

    # hooks: they run inside user code (module constructors), so they never raise
    def _on_module(self, module, _name, submodule):
        self.structure += 1
        try:
            self.add(module)
            if submodule is not None:
                self.add(submodule)
        except Exception:
            pass

    def _on_tensor(self, module, _name, _tensor):
        self.structure += 1
        try:  # noqa: SIM105 -- hot path, cheaper than contextlib.suppress
            self.add(module)
        except Exception:
            pass

    def add(self, module):
        """Track ``module`` (no-op when already tracked)."""
        key = id(module)
        entry = self._refs.get(key)
        if entry is not None and entry[0]() is module:
            return
        refs = self._refs

        def _gone(ref, key=key, refs=refs, tracker=self):
            current = refs.get(key)
            if current is not None and current[0] is ref:
                refs.pop(key, None)
                tracker.changes += 1

        try:
            ref = weakref.ref(module, _gone)
        except TypeError:
            return
        refs[key] = (ref, next(self._counter))
        self.changes += 1

    def order(self, module):
        """Creation order (int) of a tracked module, or None."""
        entry = self._refs.get(id(module))
        if entry is not None and entry[0]() is module:
            return entry[1]
        return None

    def start(self, torch):
        """Install torch's global registration hooks and scan the heap once for modules that
        exist already. Returns True when the hooks are in place."""
        if self.active:
            return True
        mm = torch.nn.modules.module
        registrars = (
            getattr(mm, "register_module_module_registration_hook", None),
            getattr(mm, "register_module_parameter_registration_hook", None),
            getattr(mm, "register_module_buffer_registration_hook", None),
        )
        if all(r is not None for r in registrars):
            self._handles = [
                registrars[0](self._on_module),
                registrars[1](self._on_tensor),
                registrars[2](self._on_tensor),
            ]
            self.active = True
        else:
            self.rescan_each_time = True
        self.scan(torch)
        return self.active

    def scan(self, torch):
        """Track every live module found by one ``gc.get_objects()`` pass."""
        module_type = torch.nn.Module
        objects = gc.get_objects()
        try:
            for obj in objects:
                if issubclass(type(obj), module_type):
                    self.add(obj)
        finally:
            del objects

    def stop(self):
        """Remove the registration hooks."""
        for handle in self._handles:
            with contextlib.suppress(Exception):
                handle.remove()
        self._handles = []
        self.active = False

    def live(self):
        """Live tracked modules: list of (module, order), oldest first. Strong references:
        callers drop the list before returning to the user."""
        out = []
        for ref, order in list(self._refs.values()):
            module = ref()
            if module is not None:
                out.append((module, order))
        out.sort(key=lambda item: item[1])
        return out


def _children(module):
    """Direct child modules (list) from ``_modules``, read without user hooks."""
    mods = _vars(module).get("_modules")
    if not mods:
        return []
    try:
        return [m for m in list(mods.values()) if m is not None]
    except Exception:
        return []


def module_forest(live):
    """Split tracked modules into top-level models and descendants.

    ``live``: list of (module, order). Returns (tops, parent): ``tops`` the (module, order)
    pairs that are no descendant (through ``_modules``) of another tracked live module,
    ``parent`` {id(descendant): parent module}.
    """
    parent = {}
    for module, _order in live:
        stack = [module]
        while stack:
            current = stack.pop()
            for child in _children(current):
                if id(child) in parent or child is module:
                    continue
                parent[id(child)] = current
                stack.append(child)
    tops = [(m, o) for m, o in live if id(m) not in parent]
    return tops, parent


def model_stats(module, on_error=None, signature=None):
    """Parameters and memory of a module tree.

    Returns (parameters, storages, has_tensors): ``parameters`` the number of elements of the
    unique parameters (int), ``storages`` {(device, data_ptr): nbytes} of the unique storages
    of parameters, buffers and gradients, ``has_tensors`` whether the tree holds at least one
    parameter or buffer. A tensor torch cannot measure (lazy parameter, sparse layout, odd
    subclass) is left out and passed to ``on_error(exception)``. ``signature``: a list that
    gets (weakref, data_ptr, gradient's data_ptr or None) of every parameter and buffer
    (``_tensors_unchanged`` checks it later).
    """
    params = {}
    buffers = {}
    seen = set()
    stack = [module]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        d = _vars(current)
        for p in list((d.get("_parameters") or {}).values()):
            if p is not None:
                params[id(p)] = p
        for b in list((d.get("_buffers") or {}).values()):
            if b is not None:
                buffers[id(b)] = b
        stack.extend(_children(current))
    count = 0
    storages = {}
    for p in params.values():
        try:
            count += int(p.numel())
            _add_storage(p, storages)
            grad = getattr(p, "_grad", None)  # .grad without the non-leaf warning
            if grad is not None:
                _add_storage(grad, storages)
            if signature is not None:
                gptr = grad.data_ptr() if grad is not None else None
                signature.append((weakref.ref(p), p.data_ptr(), gptr))
        except Exception as exc:
            if on_error is not None:
                on_error(exc)
            if signature is not None:
                signature.append((_dead_ref, 0, None))  # never unchanged: measure again
    for b in buffers.values():
        try:
            _add_storage(b, storages)
            if signature is not None:
                signature.append((weakref.ref(b), b.data_ptr(), None))
        except Exception as exc:
            if on_error is not None:
                on_error(exc)
            if signature is not None:
                signature.append((_dead_ref, 0, None))
    return count, storages, bool(params or buffers)


def _dead_ref():
    return None


def _tensors_unchanged(signature):
    """Whether every (weakref, data_ptr, gradient's data_ptr) of ``signature`` still holds."""
    try:
        for ref, ptr, gptr in signature:
            tensor = ref()
            if tensor is None or tensor.data_ptr() != ptr:
                return False
            grad = getattr(tensor, "_grad", None)
            if (grad.data_ptr() if grad is not None else None) != gptr:
                return False
    except Exception:
        return False
    return True


def model_family(cls_module):
    """``"ultralytics"``, ``"transformers"`` or ``"torch"`` from a class's ``__module__``."""
    if cls_module.startswith("ultralytics"):
        return "ultralytics"
    if cls_module.startswith("transformers"):
        return "transformers"
    return "torch"


def model_label(module, class_name, family):
    """Short human label (str): ``"YOLO (yolov8n.yaml)"`` for an Ultralytics wrapper built from
    ``yolov8n.yaml``, ``"BertModel (bert-base-uncased)"`` for transformers, else the class."""
    d = _vars(module)
    if family == "ultralytics":
        for attr in ("cfg", "ckpt_path", "model_name"):
            name = _basename(d.get(attr))
            if name:
                return f"{class_name} ({name})"
        yaml = d.get("yaml")
        if type(yaml) is dict:
            name = _basename(yaml.get("yaml_file"))
            if name:
                return f"{class_name} ({name})"
    elif family == "transformers":
        name = _vars(d.get("config")).get("_name_or_path") if d.get("config") is not None else None
        if isinstance(name, str) and name:
            return f"{class_name} ({name})"
    return class_name


# --------------------------------------------------------------------------------------------
# the holder walk


class Walker:
    """Bounded reference walk from root objects.

    It stops at tensors and at ``torch.nn.Module`` instances (reported through callbacks),
    never enters Python modules, classes, code, descriptors, weak references, frames or
    tracebacks other than the start object, or the objects in ``skip_ids`` (the user namespace,
    module ``__dict__``s, IPython's machinery...). For functions it follows only closure cells
    and defaults, for bound methods ``__self__`` and ``__func__``. Frames are read with
    ``gc.get_referents`` (never ``f_locals``, which would snapshot the locals) and their
    ``f_back`` is not followed.

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
        self.module_type = module_type
        self.skip_ids = skip_ids
        self.truncated = False
        self.expand_module = None  # callable(module) -> bool: also walk its plain attributes
        self.module_internals = frozenset()  # nn.Module's own __dict__ keys, never walked
        self.visits = 0  # whole inventory, for the record
        self._phase_visits = 0
        self._phase_examined = 0
        self._reached = {}  # id(root) -> (root, Reach) of walks from roots
        self.parents = {}  # id(object) -> the object it was reached from (None: the start)
        self.measured = 0  # tensors measured by ``reach`` (bounded by MEASURED_TENSORS)

    def start_phase(self):
        """Give the next group of roots a fresh phase budget."""
        self._phase_visits = 0
        self._phase_examined = 0

    def reach(self, root, tensor_bytes, optimizer_type=None):
        """What ``root`` reaches (a ``Reach``); a root walked before is not walked again.

        ``tensor_bytes(tensor)`` -> (storage key, nbytes) or None (unmeasurable);
        ``optimizer_type``: ``torch.optim.Optimizer`` (tensors under one are optimizer state).
        ``Reach.modules`` entries are (module, path suffix from the root, the expanded model
        above it or None, path suffix from that model).
        """
        cached = self._reached.get(id(root))
        if cached is not None and cached[0] is root:
            return cached[1]
        found = Reach()
        module_type = self.module_type

        def on_module(module):
            via = self.ancestor(module, module_type)
            rel = self.path(module, via) if via is not None else ""
            found.modules.append((module, self.path(module), via, rel))

        def on_tensor(tensor):
            if self.measured >= MEASURED_TENSORS:
                self.truncated = True  # roots' bytes are lower bounds from here on
                return
            self.measured += 1
            measured = tensor_bytes(tensor)
            if measured is None:
                return
            key, nbytes = measured
            if key in found.storages:
                return
            via = self.ancestor(tensor, module_type)
            group = None
            if via is not None:
                group = self.ancestor(tensor, optimizer_type, below=via) if optimizer_type else None
                group = group if group is not None else self.first_hop(tensor, via)
            big = nbytes >= BIG_TENSOR and found.big < MAX_BIG_TENSORS
            if big:
                found.big += 1
            found.storages[key] = (
                nbytes,
                id(via) if via is not None else None,
                (group, self.path(group, via)) if group is not None else None,
                (self.path(tensor), _tensor_meta(tensor)) if big else None,
            )

        found.complete = self.walk(root, on_module, on_tensor)
        self._reached[id(root)] = (root, found)
        return found

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
            if isinstance(current, cls):
                return current
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
            labels.append(_edge_label(chain[i - 1], chain[i], grand))
        return _short("".join(labels), MAX_PATH_TEXT)

    def walk(self, start, on_module, on_tensor):
        """Walk from ``start``; calls ``on_module(module)`` / ``on_tensor(tensor)`` once per
        object reached. Returns False when a bound cut the walk short."""
        tensor_type = self.tensor_type
        module_type = self.module_type
        skip_ids = self.skip_ids
        seen = self.parents = {id(start): None}
        stack = [start]
        visits = 0
        examined = 0
        while stack:
            obj = stack.pop()
            cls = type(obj)
            if cls in _LEAF_TYPES:
                continue
            if tensor_type is not None and issubclass(cls, tensor_type):
                on_tensor(obj)
                continue
            if module_type is not None and issubclass(cls, module_type):
                on_module(obj)
                expand = self.expand_module
                if expand is None or not expand(obj):
                    continue
                internals = self.module_internals
                refs = [v for k, v in list(_vars(obj).items()) if k not in internals]
                if visits >= ROOT_VISITS or self._phase_visits >= PHASE_VISITS:
                    self.truncated = True
                    return False
                visits += 1
                self.visits += 1
                self._phase_visits += 1
                examined += len(refs)
                self._phase_examined += len(refs)
                for ref in refs:
                    if type(ref) not in _LEAF_TYPES and id(ref) not in seen:
                        seen[id(ref)] = obj
                        stack.append(ref)
                continue
            if id(obj) in skip_ids or issubclass(cls, _OPAQUE_TYPES):
                continue
            if (cls is types.FrameType or cls is types.TracebackType) and obj is not start:
                continue
            if visits >= ROOT_VISITS or self._phase_visits >= PHASE_VISITS:
                self.truncated = True
                return False
            visits += 1
            self.visits += 1
            self._phase_visits += 1
            limit = min(ROOT_EXAMINED - examined, PHASE_EXAMINED - self._phase_examined)
            left = min(ROOT_VISITS - visits, PHASE_VISITS - self._phase_visits)
            refs = self._referents(obj, cls, limit, left)
            examined += len(refs)
            self._phase_examined += len(refs)
            for ref in refs:
                if type(ref) in _LEAF_TYPES:
                    continue
                key = id(ref)
                if key in seen:
                    continue
                seen[key] = obj
                stack.append(ref)
            spent = examined >= ROOT_EXAMINED or self._phase_examined >= PHASE_EXAMINED
            if spent and stack:
                self.truncated = True
                return False
        return True

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
        if cls in _PLAIN_CONTAINERS:
            size = len(obj) * (2 if cls is dict else 1)
            if size > limit:
                # a huge container: look at its first items only (no full copy), and keep no
                # more of them than the walk can still expand
                self.truncated = True
                it = itertools.chain.from_iterable(obj.items()) if cls is dict else iter(obj)
                left = max(min(visits_left, limit), 0)
                head = itertools.islice(it, min(limit, 4 * left))
                return list(itertools.islice((x for x in head if type(x) not in _LEAF_TYPES), left))
            if cls is dict:
                return [*obj.keys(), *obj.values()]
            return list(obj)
        if issubclass(cls, BaseException):
            # an exception's own traceback is walked frame by frame by the caller
            return [r for r in gc.get_referents(obj) if type(r) is not types.TracebackType]
        refs = gc.get_referents(obj)
        if len(refs) > limit:
            self.truncated = True
            del refs[max(limit, 0) :]
        return refs


class Reach:
    """What one root reaches (filled by ``Walker.reach``).

    ``modules``: [(module, path suffix, expanded model above it or None)];
    ``storages``: {(device, data_ptr): (nbytes, id of the model whose plain attributes led to
    the tensor or None, (group object, path suffix from that model) or None,
    (path suffix, meta dict) for tensors of at least ``BIG_TENSOR`` bytes or None)};
    ``complete``: False when a bound cut the walk.
    """

    __slots__ = ("big", "complete", "modules", "storages")

    def __init__(self):
        self.modules = []
        self.storages = {}
        self.complete = True
        self.big = 0


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


def _key_label(key):
    try:
        text = repr(key) if isinstance(key, (str, int, float, bool, bytes, tuple)) else None
    except Exception:
        text = None
    return "[" + (text[:60] if text is not None else "\u2026") + "]"


def _edge_label(parent, child, grand):
    """How ``parent`` refers to ``child`` (str): ``.name``, ``[0]``, ``['key']``, ``""`` for an
    instance ``__dict__`` hop, ``<closure>``, ``<local>``, ``<ref>``. Never runs user code:
    containers are searched by identity, attributes read from ``__dict__``."""
    cls = type(parent)
    try:
        if cls is dict:
            is_attrs = grand is not None and _vars(grand) is parent
            for key, value in itertools.islice(parent.items(), MAX_LABEL_SCAN):
                if value is child:
                    if is_attrs and isinstance(key, str) and _IDENTIFIER.match(key):
                        return "." + key
                    return _key_label(key)
                if key is child:
                    return "<key>"
            return "[\u2026]"
        if cls is list or cls is tuple:
            for i, value in enumerate(itertools.islice(parent, MAX_LABEL_SCAN)):
                if value is child:
                    return f"[{i}]"
            return "[\u2026]"
        if cls is set or cls is frozenset:
            return "{\u2026}"
        if _vars(parent) is child:
            return ""
        if cls is types.FunctionType:
            return "<closure>"
        if cls is types.CellType:
            return ""
        if cls is types.MethodType:
            return ".__self__" if parent.__self__ is child else ".__func__"
        if cls is types.FrameType:
            return _frame_local_label(parent, child)
        for key, value in list(_vars(parent).items())[:MAX_LABEL_SCAN]:
            if value is child and isinstance(key, str):
                return "." + key
    except Exception:
        pass
    return "<ref>"


def _frame_local_label(frame, child):
    """Name of the local of a finished frame that refers to ``child``, without ``f_locals``
    (which would snapshot the locals into the frame): the frame's referents after its back
    frame, function and code are its locals in ``co_varnames + co_cellvars + co_freevars``
    order when every local is bound; otherwise ``<local>``."""
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
    if len(refs) == len(names):
        for name, ref in zip(names, refs):
            if ref is child:
                return "." + name
    return "<local>"


def _tensor_meta(tensor):
    """{shape: [int], dtype: str, gradFn: str | None} of a tensor; never raises."""
    try:
        shape = [int(n) for n in tensor.shape][:16]
    except Exception:
        shape = []
    try:
        dtype = str(tensor.dtype).replace("torch.", "")
    except Exception:
        dtype = "?"
    try:
        fn = tensor.grad_fn
        grad_fn = type(fn).__name__ if fn is not None else None
    except Exception:
        grad_fn = None
    return {"shape": shape, "dtype": _short(dtype, 64), "gradFn": grad_fn and _short(grad_fn, 100)}


def _grad_fn(tensor):
    """``tensor.grad_fn`` or None; never raises."""
    try:
        return tensor.grad_fn
    except Exception:
        return None


def _shallow(value):
    """A cheap signature of an object one level deep (tuple of ints, compared with ==): its
    id and the ids of a container's items or of an instance's attributes (up to
    ``FINGERPRINT_ITEMS`` of them; of a larger container its size and its first 32 items,
    so that a new container at a freed one's address is told apart). Modules, classes and
    functions: the id."""
    cls = type(value)
    if cls in _PLAIN_CONTAINERS:
        size = len(value)
        items = value.values() if cls is dict else value
        if size <= FINGERPRINT_ITEMS:
            return (id(value), *map(id, items))
        return (id(value), -size, *map(id, itertools.islice(items, 32)))
    attrs = None if issubclass(cls, _OPAQUE_TYPES) else _vars(value)
    if attrs and len(attrs) <= FINGERPRINT_ITEMS:
        return (id(value), *map(id, list(attrs.values())))
    return (id(value),)


def _size_hint(container):
    """Items in a container and in the containers nested in it, counted up to
    ``GRAPH_ITEMS + 1`` (int): enough to tell whether a search of ``GRAPH_ITEMS`` was cut."""
    total = len(container)
    values = container.values() if type(container) is dict else container
    for item in itertools.islice(values, GRAPH_ITEMS + 1):
        if total > GRAPH_ITEMS:
            break
        if type(item) in _PLAIN_CONTAINERS:
            total += len(item)
    return total


_SAVED_NAMES = {}  # autograd node type -> tuple of its "_saved_*" attribute names


def _saved_names(node_type):
    names = _SAVED_NAMES.get(node_type)
    if names is None:
        try:
            names = tuple(a for a in dir(node_type) if a.startswith("_saved_"))
        except Exception:
            names = ()
        _SAVED_NAMES[node_type] = names
    return names


def _ignore(_obj):
    pass


_INTERNALS = []  # [frozenset] once computed


def _module_internals(torch):
    """Keys (frozenset of str) that ``torch.nn.Module.__init__`` puts in every module's
    ``__dict__``: parameters, buffers, submodules, hook dicts, ``training``."""
    if not _INTERNALS:
        keys = set(_vars(torch.nn.Module()))
        keys.update(("_parameters", "_buffers", "_modules"))
        _INTERNALS.append(frozenset(keys))
    return _INTERNALS[0]


# --------------------------------------------------------------------------------------------
# device figures


def _text(value):
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class DeviceSampler:
    """Device memory figures from NVML (``pynvml``, only if importable) and from torch's caching
    allocator (only if torch is already imported and CUDA already initialised). Never creates a
    CUDA context: NVML does not, and torch is only asked once it has one.

    ``devices``: [(cuda index, NVML handle, name, total bytes, uuid, NVML index)] for the CUDA
    devices NVML sees, in ``CUDA_VISIBLE_DEVICES`` order. ``nvml``: the pynvml module when
    initialised, else None, and then ``nvml_error`` (str) says why.
    """

    def __init__(self, pid=None):
        self.pid = os.getpid() if pid is None else pid
        self.nvml = None
        self.nvml_error = None
        self.devices = []
        self._memory_v2 = True

    def start(self):
        """Initialise NVML and list the devices; failures end up in ``nvml_error``."""
        try:
            import pynvml  # nvidia-ml-py, only when the kernel's environment has it
        except Exception as exc:
            self.nvml_error = "nvidia-ml-py (pynvml) not importable: " + _describe(exc)
            return
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            self.nvml_error = "NVML initialisation failed: " + _describe(exc)
            return
        try:
            handles = []
            uuids = []
            for i in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(i)
                handles.append(handle)
                try:
                    uuids.append(_text(pynvml.nvmlDeviceGetUUID(handle)))
                except Exception:
                    uuids.append(None)
            order = cuda_visible_nvml_indices(os.environ.get("CUDA_VISIBLE_DEVICES"), uuids)
            devices = []
            for cuda_index, nvml_index in enumerate(order):
                handle = handles[nvml_index]
                name = _text(pynvml.nvmlDeviceGetName(handle))
                total = int(self._memory(pynvml, handle).total)
                devices.append((cuda_index, handle, name, total, uuids[nvml_index], nvml_index))
            self.devices = devices
            self.nvml = pynvml
        except Exception as exc:
            self.nvml_error = "NVML device query failed: " + _describe(exc)
            self.devices = []
            with contextlib.suppress(Exception):
                pynvml.nvmlShutdown()

    def stop(self):
        """Release NVML (``nvmlShutdown`` balances ``nvmlInit``)."""
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()
            self.nvml = None

    def _memory(self, nvml, handle):
        # v2 struct: "used" excludes driver-reserved memory, as nvidia-smi shows it
        if self._memory_v2:
            try:
                return nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
            except Exception:
                self._memory_v2 = False  # old nvidia-ml-py or driver: v1 from now on
        return nvml.nvmlDeviceGetMemoryInfo(handle)

    def processes(self, cuda_index):
        """(free bytes, total bytes, [(pid, used bytes or None)]) on one device from NVML, or
        None without NVML or for an unknown index."""
        nvml = self.nvml
        for index, handle, _name, _total, _uuid, _nvml_index in self.devices:
            if index != cuda_index or nvml is None:
                continue
            try:
                mem = self._memory(nvml, handle)
                procs = [
                    (int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory))
                    for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)
                ]
                return int(mem.free), int(mem.total), procs
            except Exception:
                return None
        return None

    def describe(self):
        """Devices for ``hello``: [{index (CUDA), nvmlIndex, name, total (bytes), uuid}]."""
        return [
            {"index": index, "nvmlIndex": nvml_index, "name": name, "total": total, "uuid": uuid}
            for index, _handle, name, total, uuid, nvml_index in self.devices
        ]

    def sample(self, on_error=None):
        """Per-device figures for ``sample`` (list of dicts sorted by CUDA index): ``used`` /
        ``total`` device memory and ``process`` (this pid's share) from NVML, ``allocated`` /
        ``reserved`` from torch, ``cached`` (reserved - allocated) and ``nonTorch`` (process -
        reserved); bytes, None where not measurable. ``processHidden``: NVML lists no process
        with this pid although torch reserves memory (another pid namespace). NVML failures are
        passed to ``on_error(exception)``."""
        devices = {}
        nvml = self.nvml
        for index, handle, _name, total, _uuid, _nvml in self.devices if nvml is not None else ():
            entry = {
                "index": index,
                "used": None,
                "total": total,
                "process": None,
                "allocated": None,
                "reserved": None,
            }
            try:
                mem = self._memory(nvml, handle)
                entry["used"] = int(mem.used)
                entry["total"] = int(mem.total)
                mine = 0
                unknown = False
                for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    if proc.pid == self.pid:
                        used = getattr(proc, "usedGpuMemory", None)
                        if used is None:
                            unknown = True
                        else:
                            mine += int(used)
                entry["process"] = None if unknown else mine
            except Exception as exc:
                if on_error is not None:
                    on_error(exc)
            devices[index] = entry
        torch = _torch()
        if _cuda_initialized(torch):
            for index in range(torch.cuda.device_count()):
                entry = devices.get(index)
                if entry is None:
                    entry = devices[index] = {
                        "index": index,
                        "used": None,
                        "total": None,
                        "process": None,
                        "allocated": None,
                        "reserved": None,
                    }
                entry["allocated"] = int(torch.cuda.memory_allocated(index))
                entry["reserved"] = int(torch.cuda.memory_reserved(index))
                # On the device (memory reserved) but NVML did not list our pid: another pid
                # namespace (containers). Unknown rather than 0.
                if entry["process"] == 0 and entry["reserved"] > 0:
                    entry["process"] = None
                    entry["processHidden"] = True
        for entry in devices.values():
            allocated, reserved, process = entry["allocated"], entry["reserved"], entry["process"]
            entry["cached"] = reserved - allocated if reserved is not None else None
            # the part of this process's usage PyTorch does not hold: CUDA context, cuBLAS /
            # cuDNN workspaces and modules, other allocators
            both = process is not None and reserved is not None
            entry["nonTorch"] = max(0, process - reserved) if both else None
            entry.setdefault("processHidden", False)
        return [devices[i] for i in sorted(devices)]


# --------------------------------------------------------------------------------------------
# the agent


def _user_cell(info):
    """Whether an IPython run is a user's cell (bool). Another extension's probe (a variable
    inspector's query after each cell) runs with ``store_history=False``; IPython skips the
    cell hooks only for ``silent=True``, so the agent tells them apart itself."""
    return getattr(info, "store_history", True) is not False


class Agent:
    """One installed agent: comm target, IPython hooks, sampler thread, module tracker."""

    def __init__(self, shell, config):
        self.shell = shell
        self.kernel = shell.kernel
        self.comm_manager = self.kernel.comm_manager
        self.interval_ms = DEFAULT_INTERVAL_MS
        self.busy = False
        self.tracker = ModuleTracker()
        self.comms = {}  # comm_id -> comm
        self.sent_errors = {}  # comm_id -> set of (where, message)
        self.pending_errors = []  # (where, message) not yet seen by any comm
        self.send_lock = threading.RLock()
        self.stop_event = threading.Event()
        self.wake_event = threading.Event()
        self.thread = None
        self.sample_seq = itertools.count(1)
        self.inventory_seq = itertools.count(1)
        self.clean_snapshot = None
        self.last_inventory = None  # (fingerprint, inventory dict) of the last full inventory
        self._module_dicts = None  # (len(sys.modules), frozenset of module __dict__ ids)
        self._fruitless = {}  # (kind, name) -> signature of a root whose cut walk found nothing
        self._forest = None  # (tracker key, tops, parents) under weak references
        self._graphless = {}  # variable name -> signature of a cut graph search that found nothing
        self._stats = {}  # id(module) -> (weakref, structure, tensor signature, model_stats)
        self.devices = DeviceSampler()
        self.pid = os.getpid()
        self.configure(config)

    # ---- lifecycle

    def start(self):
        """Initialise NVML, register the comm target and hooks, start the sampler."""
        self.devices.start()
        self.ensure_tracking()
        self.ensure()

    def ensure(self):
        """Make sure exactly one of each: comm target, pre/post_run_cell hook, sampler thread."""
        if self.comm_manager.targets.get(COMM_TARGET) != self.on_comm_open:
            self.comm_manager.register_target(COMM_TARGET, self.on_comm_open)
        events = self.shell.events
        for name, fn in self._hooks():
            callbacks = events.callbacks.get(name, [])
            while callbacks.count(fn) > 1:
                callbacks.remove(fn)
            if fn not in callbacks:
                events.register(name, fn)
        if self.thread is None or not self.thread.is_alive():
            self.stop_event.clear()
            self.thread = threading.Thread(target=self._run_sampler, name=THREAD_NAME, daemon=True)
            self.thread.start()

    def _hooks(self):
        return (("pre_run_cell", self.pre_run_cell), ("post_run_cell", self.post_run_cell))

    def alive(self):
        """Whether the sampler runs (bool)."""
        return self.thread is not None and self.thread.is_alive() and not self.stop_event.is_set()

    def stop(self):
        """Undo ``start``: hooks, comm target, thread, torch hooks; close the open comms."""
        self.stop_event.set()
        self.wake_event.set()
        events = self.shell.events
        for name, fn in self._hooks():
            callbacks = events.callbacks.get(name, [])
            while fn in callbacks:
                callbacks.remove(fn)
        with contextlib.suppress(Exception):
            if self.comm_manager.targets.get(COMM_TARGET) == self.on_comm_open:
                self.comm_manager.unregister_target(COMM_TARGET, self.on_comm_open)
        for comm in list(self.comms.values()):
            with contextlib.suppress(Exception):
                comm.on_msg(None)
                comm.on_close(None)
                comm.close()
        self.comms.clear()
        self.tracker.stop()
        thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        self.devices.stop()

    def configure(self, config):
        """Apply a ``configure`` body / loader config: ``sampleIntervalMs`` (int ms, min 250)."""
        if not config:
            return
        if not isinstance(config, dict):
            raise TypeError("configuration must be an object")
        if "sampleIntervalMs" in config:
            value = config["sampleIntervalMs"]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
                raise ValueError(f"sampleIntervalMs must be a number, got {value!r}"[:200])
            self.interval_ms = max(MIN_INTERVAL_MS, int(value))
            self.wake_event.set()

    # ---- messaging

    def _send(self, comm, payload):
        with self.send_lock:
            comm.send(payload)

    def broadcast(self, payload):
        """Send ``payload`` to every open comm; a comm that fails is dropped."""
        for comm_id, comm in list(self.comms.items()):
            try:
                self._send(comm, payload)
            except Exception:
                self.comms.pop(comm_id, None)
                self.sent_errors.pop(comm_id, None)

    def error(self, where, exc):
        """Report an exception (or a message str) as an ``error`` message, once per comm."""
        try:
            message = exc if isinstance(exc, str) else _describe(exc)
            key = (where, message)
            payload = {"protocol": PROTOCOL, "type": "error", "where": where, "message": message}
            if not self.comms:
                if key not in self.pending_errors and len(self.pending_errors) < MAX_PENDING_ERRORS:
                    self.pending_errors.append(key)
                return
            for comm_id, comm in list(self.comms.items()):
                sent = self.sent_errors.setdefault(comm_id, set())
                if key in sent:
                    continue
                sent.add(key)
                with contextlib.suppress(Exception):
                    self._send(comm, payload)
        except Exception:
            pass

    def on_comm_open(self, comm, msg):
        """Comm target: remember the comm, apply its ``configure`` data, answer ``hello`` and
        ``inventory``."""
        try:
            comm_id = comm.comm_id
            comm.on_msg(self.on_comm_msg)
            comm.on_close(self.on_comm_close)
            self._send(comm, self.hello())
            # Only now does the sampler see the comm: hello is always its first message.
            self.sent_errors[comm_id] = set()
            self.comms[comm_id] = comm
            data = msg.get("content", {}).get("data") or {}
            try:
                self._check(data)
                if data.get("type") == "configure":
                    self.configure(data)
            except Exception as exc:
                self.error("comm", exc)
            for where, message in _drain(_install_errors) + _drain(self.pending_errors):
                self.error(where, message)
            self.ensure_tracking()
            inventory = self.build_inventory(None)
            if inventory is not None:
                self._send(comm, inventory)
            self.wake_event.set()
        except (Exception, KeyboardInterrupt) as exc:
            self.error("comm", exc)

    def on_comm_msg(self, msg):
        """Handle ``configure`` and ``inventory`` requests from the browser."""
        try:
            content = msg.get("content", {})
            data = content.get("data") or {}
            self._check(data)
            kind = data.get("type")
            if kind == "configure":
                self.configure(data)
            elif kind == "inventory":
                self.ensure_tracking()
                inventory = self.build_inventory(None)
                comm = self.comms.get(content.get("comm_id"))
                if inventory is not None and comm is not None:
                    self._send(comm, inventory)
            else:
                raise ValueError(f"unknown message type {kind!r}"[:200])
        except (Exception, KeyboardInterrupt) as exc:
            self.error("comm", exc)

    def on_comm_close(self, msg):
        """Forget a comm the browser closed."""
        try:
            comm_id = msg.get("content", {}).get("comm_id")
            self.comms.pop(comm_id, None)
            self.sent_errors.pop(comm_id, None)
        except Exception as exc:
            self.error("comm", exc)

    @staticmethod
    def _check(data):
        if not isinstance(data, dict):
            raise TypeError("message data must be an object")
        if data.get("protocol") != PROTOCOL:
            raise ValueError(f"unsupported protocol {data.get('protocol')!r}"[:200])

    def hello(self):
        """The ``hello`` message (dict)."""
        torch = _torch()
        version = None
        if torch is not None:
            version = getattr(torch, "__version__", None)
            version = str(version) if version is not None else None
        return {
            "protocol": PROTOCOL,
            "type": "hello",
            "agentVersion": AGENT_VERSION,
            "python": sys.version.split()[0],
            "pid": self.pid,
            "torch": version,
            "nvml": self.devices.nvml is not None,
            "nvmlError": self.devices.nvml_error,
            "devices": self.devices.describe(),
        }

    # ---- IPython hooks

    def pre_run_cell(self, info=None):
        """``pre_run_cell``: busy; snapshot models before a clean cell. Not for a probe
        without history (``_user_cell``)."""
        try:
            if not _user_cell(info):
                return
            self.busy = True
            self.wake_event.set()
            raw = getattr(info, "raw_cell", None)
            self.clean_snapshot = None
            if isinstance(raw, str) and CLEAN_MARKER in raw and self.comms:
                self.ensure_tracking()
                self.clean_snapshot = self._clean_snapshot()
        except (Exception, KeyboardInterrupt) as exc:
            self.error("clean", exc)

    def post_run_cell(self, result=None):
        """``post_run_cell``: idle; send ``inventory`` (and ``cleaned`` after a clean cell).
        Not for a probe without history (``_user_cell``)."""
        try:
            if not _user_cell(getattr(result, "info", None)):
                return
            self.busy = False
            self.wake_event.set()
            snapshot, self.clean_snapshot = self.clean_snapshot, None
            if not self.comms:
                return
            self.ensure_tracking()
            count = getattr(result, "execution_count", None)
            count = count if isinstance(count, int) and not isinstance(count, bool) else None
            inventory = self.build_inventory(count, reuse=snapshot is None)
            if inventory is not None:
                self.broadcast(inventory)
            error = _vars(result).get("error_in_exec") if result is not None else None
            if inventory is not None and _is_cuda_oom(error):
                try:
                    self.broadcast(self._oom(error, count, inventory))
                except Exception as exc:
                    self.error("inventory", exc)
            if snapshot is not None:
                try:
                    self.broadcast(self._cleaned(snapshot, count))
                except Exception as exc:
                    self.error("clean", exc)
        except (Exception, KeyboardInterrupt) as exc:
            self.error("inventory", exc)

    def ensure_tracking(self):
        """Start module tracking once torch has been imported (by the user)."""
        try:
            if self.tracker.active and not self.tracker.rescan_each_time:
                return
            torch = _torch()
            if torch is None:
                return
            if self.tracker.rescan_each_time:
                self.tracker.scan(torch)
            else:
                self.tracker.start(torch)
        except Exception as exc:
            self.error("inventory", exc)

    # ---- sampler

    def _run_sampler(self):
        try:
            while not self.stop_event.is_set():
                current = getattr(sys.modules.get(MODULE_NAME), "_agent", None)
                if current is not None and current is not self:
                    break  # replaced by another agent that could not stop this one
                if self.comms:
                    try:
                        payload = self.sample()
                    except Exception as exc:
                        self.error("sample", exc)
                    else:
                        self.broadcast(payload)
                self.wake_event.wait(self.interval_ms / 1000.0)
                self.wake_event.clear()
        except BaseException:
            pass  # interpreter shutdown; never let a thread traceback reach stderr

    def sample(self):
        """The ``sample`` message (dict): NVML and torch allocator figures, in bytes."""
        return {
            "protocol": PROTOCOL,
            "type": "sample",
            "t": time.time(),
            "seq": next(self.sample_seq),
            "busy": bool(self.busy),
            "devices": self.devices.sample(self._nvml_error),
        }

    def _nvml_error(self, exc):
        self.error("nvml", exc)

    # ---- inventory

    def build_inventory(self, execution_count, reuse=False):
        """The ``inventory`` message (dict), or None when building it failed (an ``error``
        message was sent instead). ``reuse``: when nothing the inventory depends on changed
        since the last one (``_fingerprint``), re-send that one (``skipped: true``)."""
        started = time.perf_counter()
        try:
            fingerprint = self._fingerprint()
            last = self.last_inventory
            if reuse and last is not None and fingerprint == last[0]:
                inventory = dict(last[1])
                inventory.update(
                    t=time.time(),
                    seq=next(self.inventory_seq),
                    executionCount=execution_count,
                    durationMs=(time.perf_counter() - started) * 1000.0,
                    skipped=True,
                )
                return inventory
            self.last_inventory = None
            inventory = self._inventory(execution_count, started)
            # the fingerprint after the walk: the walk itself adds unpickled models
            self.last_inventory = (self._fingerprint(), inventory)
            return inventory
        except (Exception, KeyboardInterrupt) as exc:
            self.last_inventory = None
            self.error("inventory", exc)
            return None

    def _fingerprint(self):
        """What an inventory depends on, cheaply (tuple, compared with ==; holds no user
        object): the tracked-module set and registration events (the tracker's counts),
        torch's allocated bytes per device, the first and last tensor of each model
        (``_probe_tensors``), the user namespace's bindings with one level of their content
        (ids of a container's items or of an object's attributes, up to
        ``FINGERPRINT_ITEMS``; the length beyond), the output cache and the display hook's
        slots, and the last exception."""
        shell = self.shell
        parts = [
            self.tracker.changes,
            self.tracker.structure,
            _torch() is not None,
            self._torch_memory(),
            self._probe_tensors(),
        ]
        for space in (shell.user_ns, shell.user_ns_hidden):
            for name, value in list(space.items()):
                cls = type(value)
                if cls in _LEAF_TYPES or (isinstance(name, str) and _SYSTEM_NAME.match(name)):
                    continue
                parts.append((name, _shallow(value)))
        cache = _output_cache(shell)
        parts.append(tuple(map(id, list(cache.values()))) if type(cache) is dict else None)
        displayhook = getattr(shell, "displayhook", None)
        slots = _vars(displayhook) if displayhook is not None else {}
        parts.append(tuple(id(slots.get(k)) for k in ("_", "__", "___")))
        last = getattr(shell, "last_execution_result", None)
        last_vars = _vars(last) if last is not None else {}
        parts.append(
            (
                id(getattr(sys, "last_value", None)),
                id(getattr(sys, "last_exc", None)),
                id(getattr(sys, "last_traceback", None)),
                id(getattr(getattr(shell, "InteractiveTB", None), "tb", None)),
                id(last_vars.get("error_in_exec")),
                id(last_vars.get("result")),
            )
        )
        return tuple(parts)

    def _probe_tensors(self):
        """The first and last parameter or buffer of each model measured by the last
        inventory, as (data_ptr, gradient's data_ptr) (tuple): a backward pass, ``.to()`` or
        ``.half()`` changes them also where torch's allocated bytes cannot tell (CPU)."""
        out = []
        for _ref, _structure, signature, _result in list(self._stats.values()):
            for ref, _ptr, _gptr in (signature[0], signature[-1]) if signature else ():
                tensor = ref()
                if tensor is None:
                    out.append(None)
                    continue
                try:
                    grad = getattr(tensor, "_grad", None)
                    out.append((tensor.data_ptr(), grad.data_ptr() if grad is not None else None))
                except Exception:
                    out.append(None)
        return tuple(out)

    def _models(self):
        """Top-level models: (tops, parent) from ``module_forest`` over the tracked modules;
        strong references, drop them before returning to the user.

        The forest is kept between inventories under weak references while the tracker saw
        no module added or gone and no registration event (``changes``, ``structure``); a
        module tree edited without one (``del model.head``) is seen at the next event."""
        tracker = self.tracker
        key = (tracker.changes, tracker.structure)
        cached = self._forest
        if cached is not None and cached[0] == key and tracker.active:
            tops = [(ref(), order) for ref, order in cached[1]]
            parent = {k: ref() for k, ref in cached[2].items()}
            if all(m is not None for m, _o in tops) and all(parent.values()):
                return tops, parent
        tops, parent = module_forest(tracker.live())
        try:
            self._forest = (
                key,
                [(weakref.ref(m), o) for m, o in tops],
                {k: weakref.ref(m) for k, m in parent.items()},
            )
        except TypeError:
            self._forest = None
        return tops, parent

    def _model_stats(self, module, cache):
        """``model_stats(module)``, from the last inventory when nothing it read changed: no
        registration event since, and every parameter and buffer still alive with the same
        ``data_ptr()`` and the same gradient (``.to()``, ``.half()``, a backward pass change
        those). The answer is put in ``cache`` (the next inventory's)."""
        tracker = self.tracker
        cached = self._stats.get(id(module))
        if (
            cached is not None
            and tracker.active
            and cached[0]() is module
            and cached[1] == tracker.structure
            and _tensors_unchanged(cached[2])
        ):
            cache[id(module)] = cached
            return cached[3]
        signature = []
        result = model_stats(module, self._inventory_error, signature)
        with contextlib.suppress(TypeError):  # a module without weak references: not cached
            cache[id(module)] = (weakref.ref(module), tracker.structure, signature, result)
        return result

    def _inventory(self, execution_count, started):
        torch = _torch()
        cuda = _cuda_initialized(torch)
        shell = self.shell
        optimizer_type = None
        if torch is not None:
            walker = Walker(torch.Tensor, torch.nn.Module, self._skip_ids())
            optim = getattr(torch, "optim", None)
            optimizer_type = getattr(optim, "Optimizer", None) if optim is not None else None
            # A model's plain attributes (a trainer, its EMA copy, an optimizer...) are walked
            # too: what hangs off a model is reported as its parts. Known submodules are not
            # expanded.
            forest = (self.tracker.changes, *self._models())
            known_parent = forest[2]
            walker.expand_module = lambda module: id(module) not in known_parent
            walker.module_internals = _module_internals(torch)
        else:
            forest = None
            walker = Walker(None, None, self._skip_ids())
        roots = []  # (kind, name, Reach) in attribution order
        fruitless = {}  # (kind, name) -> _shallow(value): cut walks that found nothing
        variables = self._variable_roots(shell)
        if torch is not None:
            for kind, pairs in (("variable", variables), ("output", self._output_roots(shell))):
                walker.start_phase()
                for name, value in pairs:
                    # A root whose last walk hit a bound and found nothing, unchanged one level
                    # deep since: not walked again (its figures were a lower bound already).
                    memo = (kind, name)
                    sig = _shallow(value)
                    if self._fruitless.get(memo) == sig:
                        walker.truncated = True
                        fruitless[memo] = sig
                        continue
                    found = walker.reach(value, _storage_of, optimizer_type)
                    roots.append((kind, name, found))
                    if not found.complete and not found.modules and not found.storages:
                        fruitless[memo] = sig
                del pairs
        self._fruitless = fruitless
        walker.start_phase()
        last_error = self._walk_last_error(shell, walker, roots, optimizer_type)
        truncated = walker.truncated
        walker.expand_module = None
        walker.parents = {}
        census = {
            "models": [],
            "roots": [],
            "unattributed": {},
            "tensors": [],
            "graphs": [],
        }
        if torch is not None:
            for _kind, _name, found in roots:
                for module, _suffix, _via, _rel in found.modules:
                    self.tracker.add(module)  # e.g. unpickled models the hooks never saw
            if forest[0] != self.tracker.changes:
                forest = (None, *self._models())  # the walk found modules the hooks missed
            census = self._census(roots, truncated, cuda, torch, variables, forest[1:])
            truncated = truncated or census["cut"]
        del roots, variables, forest
        return {
            "protocol": PROTOCOL,
            "type": "inventory",
            "t": time.time(),
            "seq": next(self.inventory_seq),
            "executionCount": execution_count,
            "durationMs": (time.perf_counter() - started) * 1000.0,
            "skipped": False,
            "torchImported": torch is not None,
            "cudaInitialized": cuda,
            "truncated": bool(truncated),
            "models": census["models"],
            "lastError": last_error,
            "roots": census["roots"],
            "unattributed": census["unattributed"],
            "tensors": census["tensors"],
            "graphs": census["graphs"],
        }

    def _census(self, roots, truncated, cuda, torch, variables, forest):
        """Models with holders and parts, bytes per root, loose tensors and graph holders (see
        the ``inventory`` message). ``roots``: [(kind, name, Reach)] in attribution order;
        ``variables``: the user variables [(name, value)]; ``forest``: ``_models()``."""
        tops, parent = forest

        def owner(module):
            current = module
            hops = 0
            while id(current) in parent and hops < 10000:
                current = parent[id(current)]
                hops += 1
            return current

        # who reaches each top-level model, and whether only through another model
        holders = {}  # id(top) -> {(kind, name): path}
        direct = set()  # ids of tops some root reaches not through another model
        via_of = {}  # id(top) -> (id(model above), path from it)
        for kind, name, found in roots:
            for module, suffix, via, rel in found.modules:
                top = owner(module)
                holders.setdefault(id(top), {}).setdefault((kind, name), name + suffix)
                via_top = owner(via) if via is not None else None
                if via_top is None or via_top is top:
                    direct.add(id(top))
                elif id(top) not in via_of:
                    via_of[id(top)] = (id(via_top), rel)

        def listed(key, hops=0):
            """The listed model a top belongs to (its own id when it is listed)."""
            while key in via_of and key not in direct and hops < 100:
                key = via_of[key][0]
                hops += 1
            return key

        stats = {}
        measured = {}  # the next inventory's cache of model_stats (see _model_stats)
        for module, _order in tops:
            try:
                stats[id(module)] = self._model_stats(module, measured)
            except Exception as exc:
                self.error("inventory", exc)
        self._stats = measured
        params = {}
        for _count, storages, _has in stats.values():
            params.update(storages)
        reached = {}  # storage -> {(kind, name)} of the roots whose walk reached it
        for kind, name, found in roots:
            for storage in found.storages:
                reached.setdefault(storage, set()).add((kind, name))
        graphs, graphs_cut = self._graph_holders(torch, variables, params, reached)
        graph_storages = {}  # variable name -> {storage: nbytes} its graphs keep
        for graph in graphs:
            graph_storages[graph["name"]] = graph.pop("storages")
        # parts: models and tensors under a listed model, each storage counted once
        part_list = {}  # id(listed) -> [part dict]
        counted = {}  # id(listed) -> set of storage keys
        for module, _order in tops:
            key = id(module)
            if key not in stats or not stats[key][2] or listed(key) != key:
                continue
            counted[key] = set(stats[key][1])
            part_list[key] = []
        for module, _order in tops:
            key = id(module)
            home = listed(key)
            if home == key or home not in counted or key not in stats or not stats[key][2]:
                continue
            storages = stats[key][1]
            fresh = {k: n for k, n in storages.items() if k not in counted[home]}
            counted[home].update(storages)
            path = via_of[key][1].lstrip(".")
            part_list[home].append(
                {
                    "path": _short(path or type(module).__name__),
                    "kind": "model",
                    "className": _short(type(module).__name__),
                    "bytes": _bytes_by_device(fresh),
                }
            )
        groups = {}  # (id(listed), id(group)) -> part dict
        for _kind, _name, found in roots:
            for storage, (nbytes, via, group, _big) in found.storages.items():
                if via is None or group is None:
                    continue
                home = listed(via)
                # a storage of a live model's own tensors is that model's, wherever found
                if home not in counted or storage in counted[home] or storage in params:
                    continue
                counted[home].add(storage)
                obj, rel = group
                part = groups.get((home, id(obj)))
                if part is None:
                    is_opt = self._is_optimizer(obj, torch)
                    part = groups[(home, id(obj))] = {
                        "path": _short(rel.lstrip(".") or type(obj).__name__),
                        "kind": "optimizer" if is_opt else "tensor",
                        "className": _short(type(obj).__name__),
                        "bytes": {},
                    }
                    part_list[home].append(part)
                device = storage[0]
                part["bytes"][device] = part["bytes"].get(device, 0) + nbytes
        # models
        models = []
        keeps = {}  # id(listed) -> {storage: nbytes}: own storages and parts
        for module, order in tops:
            key = id(module)
            if key not in counted:
                continue
            keeps[key] = dict(stats[key][1])
            entry = self._model_entry(
                module,
                order,
                holders.get(key, {}),
                stats[key],
                part_list[key][:MAX_PARTS],
                truncated,
            )
            if entry is not None:
                models.append(entry)
        for _kind, _name, found in roots:
            for storage, (nbytes, via, _group, _big) in found.storages.items():
                if via is None:
                    continue
                home = listed(via)
                if home in keeps:
                    keeps[home][storage] = nbytes
        for module, _order in tops:
            key = id(module)
            home = listed(key)
            if home != key and home in keeps and key in stats:
                keeps[home].update(stats[key][1])
        cut = False
        if len(models) > MAX_MODELS:
            # keep the largest; the rest is said to be cut
            models.sort(key=lambda m: sum(m["bytes"].values()), reverse=True)
            del models[MAX_MODELS:]
            models.sort(key=lambda m: m["order"])
            cut = True
        # bytes per root, every storage counted once, in root order
        attributed = set()
        per_root = {}  # (kind, name) -> [bytes by device, models, tensors]
        loose = {}  # storage -> (nbytes, kind, path, meta)
        for kind, name, found in roots:
            entry = per_root.setdefault((kind, name), [{}, set(), 0])
            kept = {}
            for module, _suffix, _via, _rel in found.modules:
                home = listed(id(owner(module)))
                if home in keeps:
                    entry[1].add(home)
                    kept.update(keeps[home])
            for storage, (nbytes, via, _group, big) in found.storages.items():
                if via is None and storage not in params:
                    kept[storage] = nbytes
                    if storage not in attributed:
                        entry[2] += 1
                    if big is not None and storage not in loose:
                        loose[storage] = (nbytes, kind, name + big[0], big[1])
            if kind == "variable":
                kept.update(graph_storages.get(name, {}))
            for storage, nbytes in kept.items():
                if storage not in attributed:
                    attributed.add(storage)
                    entry[0][storage[0]] = entry[0].get(storage[0], 0) + nbytes
        hidden = {}
        hidden_models = set()
        for key, keep in keeps.items():
            if key in holders:
                continue
            hidden_models.add(key)
            for storage, nbytes in keep.items():
                if storage not in attributed:
                    attributed.add(storage)
                    hidden[storage[0]] = hidden.get(storage[0], 0) + nbytes
        root_list = []
        for (kind, name), (by_device, reached, tensors) in per_root.items():
            if by_device or reached:
                root_list.append(
                    {
                        "kind": kind,
                        "name": _short(name),
                        "bytes": by_device,
                        "models": len(reached),
                        "tensors": tensors,
                    }
                )
        if hidden_models:
            root_list.append(
                {
                    "kind": "hidden",
                    "name": UNKNOWN_HOLDER if truncated else HIDDEN_HOLDER,
                    "bytes": hidden,
                    "models": len(hidden_models),
                    "tensors": 0,
                }
            )
        root_list.sort(key=lambda r: sum(r["bytes"].values()), reverse=True)
        cut = cut or len(root_list) > MAX_ROOTS
        del root_list[MAX_ROOTS:]
        unattributed = {}
        memory = self._torch_memory() if cuda else None
        for device, (allocated, _reserved) in (memory or {}).items():
            total = sum(r["bytes"].get(device, 0) for r in root_list)
            unattributed[device] = max(0, allocated - total)
        tensors = [
            {
                "path": _short(path),
                "kind": kind,
                "device": storage[0],
                "bytes": nbytes,
                **meta,
            }
            for storage, (nbytes, kind, path, meta) in sorted(
                loose.items(), key=lambda item: item[1][0], reverse=True
            )[:MAX_TENSORS]
        ]
        del tops, stats, keeps
        return {
            "models": models,
            "roots": root_list,
            "unattributed": unattributed,
            "tensors": tensors,
            "graphs": graphs,
            "cut": cut or graphs_cut,
        }

    def _graph_holders(self, torch, variables, params, reached):
        """User variables keeping autograd graphs alive (the ``graphs`` of an inventory).

        ``variables``: [(name, value)] user variables; ``params``: {storage key: nbytes} of the
        live models; ``reached``: {storage key: {(kind, name)}} of the roots' walks. A
        variable counts when it is a tensor with ``grad_fn`` whose graph saves tensors, or a
        list/tuple/dict/set holding such tensors directly or in containers nested once. Bytes
        estimate what dropping the graphs would free: the tensors plus the unique storages the
        graphs' nodes saved for backward (``_saved_*``), without what lives anyway (leaf
        tensors that require grad, the models' storages, and storages another root reaches,
        such as a saved input batch ``xb``). At most ``GRAPH_NODES`` nodes per inventory.
        Returns (list, truncated)."""
        tensor_type = torch.Tensor
        budget = [GRAPH_NODES]
        items_left = [GRAPH_ITEMS_TOTAL]
        graphless = {}  # name -> _shallow(value) of cut searches that found nothing
        cut = False
        out = []
        for name, value in variables:
            if len(out) >= MAX_GRAPH_HOLDERS:
                cut = True
                break
            cls = type(value)
            if issubclass(cls, tensor_type):
                container = "tensor"
                found = [value] if _grad_fn(value) is not None else []
                path = name
            elif cls in _PLAIN_CONTAINERS:
                container = cls.__name__
                # a big container whose cut search found nothing, unchanged one level deep
                # since: not searched again (as for the holder walk's fruitless roots)
                sig = _shallow(value)
                if self._graphless.get(name) == sig:
                    graphless[name] = sig
                    cut = True
                    continue
                found, label, many = self._grad_tensors(value, tensor_type, items_left)
                cut = cut or many
                if many and not found:
                    graphless[name] = sig
                path = name + (label or "")
            else:
                continue
            if not found:
                continue
            me = {("variable", name)}

            def lives_anyway(storage, me=me):
                return storage in params or reached.get(storage, me) != me

            storages, nodes, partial = self._graph_bytes(found, tensor_type, lives_anyway, budget)
            cut = cut or partial
            if container == "tensor" and len(storages) <= 1:
                continue  # a lone tensor whose graph saves nothing (backward already ran)
            fn = _grad_fn(found[0])
            out.append(
                {
                    "name": _short(name),
                    "path": _short(path),
                    "container": container,
                    "count": len(found),
                    "gradFn": _short(type(fn).__name__, 100),
                    "bytes": _bytes_by_device(storages),
                    "nodes": nodes,
                    "truncated": partial,
                    "storages": storages,  # for the census; removed before sending
                }
            )
        self._graphless = graphless
        return out, cut

    @staticmethod
    def _grad_tensors(value, tensor_type, budget):
        """Tensors with ``grad_fn`` in a container and in containers nested once in it.

        Looks at no more than ``GRAPH_ITEMS`` items, nor than ``budget[0]`` (the items left to
        this inventory, decreased). Returns (tensors, label, cut): ``label`` the path suffix of
        the nested container when all of them sit in one (``"['loss']"``), else None; ``cut``
        when the items allowed were not enough."""
        found = []
        homes = set()
        label = None
        seen = 0
        allowed = max(0, min(GRAPH_ITEMS, budget[0]))

        def items(container):
            if type(container) is dict:
                return container.items()
            return ((None, item) for item in container)

        for key, item in itertools.islice(items(value), allowed):
            seen += 1
            cls = type(item)
            if issubclass(cls, tensor_type):
                if _grad_fn(item) is not None:
                    found.append(item)
                    homes.add(None)
            elif cls in _PLAIN_CONTAINERS:
                for _inner_key, inner in itertools.islice(items(item), allowed - seen):
                    seen += 1
                    if issubclass(type(inner), tensor_type) and _grad_fn(inner) is not None:
                        if id(item) not in homes:
                            homes.add(id(item))
                            label = _edge_label(value, item, None) if key is None else None
                            label = label or _key_label(key)
                        found.append(inner)
            if seen >= allowed:
                break
        budget[0] -= seen
        if len(homes) != 1 or None in homes:
            label = None
        return found, label, seen >= allowed and seen < _size_hint(value)

    @staticmethod
    def _graph_bytes(tensors, tensor_type, lives_anyway, budget):
        """({storage key: nbytes}, nodes visited, cut) for the graphs behind ``tensors``;
        storages for which ``lives_anyway(key)`` is true are left out.

        ``grad_fn`` and ``next_functions`` hand out new Python objects for the nodes, so the
        visited ones are kept (``seen`` maps id to node) until the walk ends: otherwise a
        later node can be created at a freed one's address and be taken for visited."""
        storages = {}

        def add(tensor):
            if tensor.is_leaf and tensor.requires_grad:
                return
            measured = _storage_of(tensor)
            if measured is not None and not lives_anyway(measured[0]):
                storages[measured[0]] = measured[1]

        stack = []
        seen = {}
        for tensor in tensors:
            with contextlib.suppress(Exception):
                add(tensor)
            fn = _grad_fn(tensor)
            if fn is not None and id(fn) not in seen:
                seen[id(fn)] = fn
                stack.append(fn)
        nodes = 0
        while stack:
            if budget[0] <= 0:
                return storages, nodes, True
            budget[0] -= 1
            node = stack.pop()
            nodes += 1
            for attr in _saved_names(type(node)):
                try:
                    saved = getattr(node, attr)
                except Exception:
                    continue  # freed by backward, or not a tensor slot
                if isinstance(saved, tensor_type):
                    with contextlib.suppress(Exception):
                        add(saved)
                elif type(saved) in (tuple, list):
                    for item in saved:
                        if isinstance(item, tensor_type):
                            with contextlib.suppress(Exception):
                                add(item)
            try:
                nexts = node.next_functions
            except Exception:
                nexts = ()
            for nxt, _index in nexts:
                if nxt is not None and id(nxt) not in seen:
                    seen[id(nxt)] = nxt
                    stack.append(nxt)
        return storages, nodes, False

    @staticmethod
    def _is_optimizer(obj, torch):
        try:
            return isinstance(obj, torch.optim.Optimizer)
        except Exception:
            return False

    def _model_entry(self, module, order, holder_paths, stats, parts, truncated=False):
        cls = type(module)
        class_name = getattr(cls, "__name__", "Module")
        cls_module = getattr(cls, "__module__", "") or ""
        if not isinstance(cls_module, str):
            cls_module = ""
        parameters, storages, has_tensors = stats
        if not has_tensors:
            return None
        family = model_family(cls_module)
        kinds_order = {"variable": 0, "output": 1, "traceback": 2}
        pairs = sorted(holder_paths.items(), key=lambda p: kinds_order.get(p[0][0], 3))
        holders = [
            {"kind": kind, "name": _short(name), "path": _short(path)}
            for (kind, name), path in pairs[:MAX_HOLDERS]
        ]
        unknown = False
        if not holders:
            # Nothing reached it. After a cut walk that proves nothing: a name may still hold it,
            # so it is not called stale (nothing offers to free it).
            unknown = truncated
            name = UNKNOWN_HOLDER if unknown else HIDDEN_HOLDER
            holders = [{"kind": "hidden", "name": name, "path": name}]
        return {
            "id": hex(id(module)),
            "order": order,
            "className": _short(class_name),
            "module": _short(cls_module),
            "family": family,
            "label": _short(model_label(module, class_name, family)),
            "parameters": parameters,
            "bytes": _bytes_by_device(storages),
            # small tensor groups (a stride, a loss's constants) are counted in the roots' bytes
            # but not listed
            "parts": [
                p for p in parts if p["kind"] != "tensor" or sum(p["bytes"].values()) >= BIG_TENSOR
            ],
            "holders": holders,
            "stale": not unknown and not any(h["kind"] == "variable" for h in holders),
        }

    def _inventory_error(self, exc):
        self.error("inventory", exc)

    def _skip_ids(self):
        """ids of objects the walk never enters: namespaces, module dicts, IPython and kernel
        machinery, this agent."""
        shell = self.shell
        skip = {
            id(shell),
            id(self),
            id(self.kernel),
            id(self.comm_manager),
            id(self.tracker),
            id(sys.modules),
            id(self.comms),
        }
        for obj in (
            shell.user_ns,
            getattr(shell, "user_global_ns", None),
            shell.user_ns_hidden,
            getattr(shell, "displayhook", None),
            getattr(shell, "history_manager", None),
            getattr(shell, "events", None),
            getattr(shell, "InteractiveTB", None),
            getattr(shell, "display_pub", None),
            shell.user_ns.get("Out"),
            shell.user_ns.get("_oh"),
            shell.user_ns.get("In"),
            shell.user_ns.get("_ih"),
            getattr(getattr(shell, "history_manager", None), "output_hist", None),
        ):
            if obj is not None:
                skip.add(id(obj))
        skip.update(self._module_dict_ids())
        return skip

    def _module_dict_ids(self):
        """ids of the ``__dict__`` of every imported module (frozenset), recomputed only when
        the number of entries in ``sys.modules`` changed (a module's dict keeps its identity
        for the module's life)."""
        modules = sys.modules
        cached = self._module_dicts
        if cached is not None and cached[0] == len(modules):
            return cached[1]
        ids = set()
        for module in list(modules.values()):
            if issubclass(type(module), types.ModuleType):
                # Never gc.get_referents(module): CPython 3.12 before 3.12.6 hands out freed
                # objects from _asyncio's free list there, and the next collection loops
                # forever (python/cpython#122695; it hung kernels in their first import).
                try:
                    ref = _MODULE_DICT.__get__(module)
                except Exception:
                    continue
                if type(ref) is dict:
                    ids.add(id(ref))
        ids = frozenset(ids)
        self._module_dicts = (len(modules), ids)
        return ids

    @staticmethod
    def _variable_roots(shell):
        """User variables: (name, value) pairs of ``user_ns`` that IPython's ``%who`` rule does
        not hide (value is not ``user_ns_hidden[name]``), without the output-cache and IPython
        names."""
        ns = shell.user_ns
        hidden = shell.user_ns_hidden
        out = []
        for name, value in list(ns.items()):
            if not isinstance(name, str):
                continue
            if _SYSTEM_NAME.match(name) or _is_output_name(shell, name, value):
                continue
            if hidden.get(name, _MISSING) is value:
                continue
            if type(value) in _LEAF_TYPES:
                continue
            out.append((name, value))
        return out

    @staticmethod
    def _output_roots(shell):
        """Output cache: (holder name, value): ``Out[n]``, ``_n``, ``_``, ``__``, ``___`` (user_ns,
        user_ns_hidden, the display hook's own slots) and the last result."""
        out = []
        ns = shell.user_ns
        hidden = shell.user_ns_hidden
        for space in (ns, hidden):
            for name, value in list(space.items()):
                output = isinstance(name, str) and _is_output_name(shell, name, value)
                if output and type(value) not in _LEAF_TYPES:
                    out.append((name, value))
        displayhook = getattr(shell, "displayhook", None)
        for slot in ("_", "__", "___"):
            value = _vars(displayhook).get(slot) if displayhook is not None else None
            if value is not None and type(value) not in _LEAF_TYPES:
                out.append((slot, value))
        caches = []
        for cache in (
            ns.get("Out"),
            ns.get("_oh"),
            getattr(getattr(shell, "history_manager", None), "output_hist", None),
        ):
            if type(cache) is dict and all(cache is not c for c in caches):
                caches.append(cache)
        for cache in caches:
            for key, value in list(cache.items()):
                if type(value) not in _LEAF_TYPES:
                    out.append((f"Out[{key}]", value))
        last = getattr(shell, "last_execution_result", None)
        value = _vars(last).get("result") if last is not None else None
        if value is not None and type(value) not in _LEAF_TYPES:
            out.append(("_", value))
        return out

    @staticmethod
    def _exceptions(shell):
        """The last exception(s): sys.last_exc / last_value, the last cell's error_in_exec and
        their causes/contexts (list, deduplicated), and sys.last_type (or None)."""
        roots = []
        for value in (getattr(sys, "last_exc", None), getattr(sys, "last_value", None)):
            if isinstance(value, BaseException):
                roots.append(value)
        last = getattr(shell, "last_execution_result", None)
        value = _vars(last).get("error_in_exec") if last is not None else None
        if isinstance(value, BaseException):
            roots.append(value)
        out = []
        seen = set()
        stack = list(reversed(roots))
        while stack and len(out) < 100:
            exc = stack.pop()
            if id(exc) in seen:
                continue
            seen.add(id(exc))
            out.append(exc)
            for attr in ("__cause__", "__context__"):
                try:
                    nxt = getattr(exc, attr)
                except Exception:
                    nxt = None
                if isinstance(nxt, BaseException):
                    stack.append(nxt)
        return out

    def _walk_last_error(self, shell, walker, roots, optimizer_type):
        """Walk the last traceback: appends (``"traceback"``, ``"last traceback (<frame>)"``,
        Reach) to ``roots`` and returns the ``lastError`` dict (or None when there is no last
        exception)."""
        excs = self._exceptions(shell)
        tbs = [getattr(sys, "last_traceback", None)]
        tbs.append(getattr(getattr(shell, "InteractiveTB", None), "tb", None))
        for exc in excs:
            with contextlib.suppress(Exception):
                tbs.append(exc.__traceback__)
        frames = []
        seen_frames = set()
        seen_tbs = set()
        for tb in tbs:
            depth = 0
            while (
                isinstance(tb, types.TracebackType)
                and depth < MAX_TB_DEPTH
                and len(frames) < MAX_FRAMES
            ):
                if id(tb) in seen_tbs:
                    break
                seen_tbs.add(id(tb))
                frame = tb.tb_frame
                if id(frame) not in seen_frames:
                    seen_frames.add(id(frame))
                    if not _machinery_frame(frame):
                        frames.append(frame)
                tb = tb.tb_next
                depth += 1
        if not frames and not excs:
            return None
        total = {}
        frame_entries = []
        for frame in frames:
            name = frame.f_code.co_name
            found = walker.reach(frame, _storage_of, optimizer_type)
            roots.append(("traceback", f"last traceback ({name})", found))
            storages = {key: value[0] for key, value in found.storages.items()}
            total.update(storages)
            frame_entries.append(
                {
                    "name": _short(name),
                    "bytes": _bytes_by_device(storages),
                    "tensors": len(storages),
                }
            )
        innermost = frames[-1].f_code.co_name if frames else "exception"
        for exc in excs:
            found = walker.reach(exc, _storage_of, optimizer_type)
            roots.append(("traceback", f"last traceback ({innermost})", found))
            total.update({key: value[0] for key, value in found.storages.items()})
        if excs:
            kind = type(excs[0]).__name__
            message = _describe(excs[0])[len(kind) + 2 :]
        else:
            last_type = getattr(sys, "last_type", None)
            kind = getattr(last_type, "__name__", "") if last_type is not None else ""
            message = ""
        del frames, excs, tbs
        return {
            "type": _short(kind),
            "message": _short(message),
            "frames": frame_entries,
            "bytes": _bytes_by_device(total),
        }

    # ---- out of memory

    def _oom(self, exc, execution_count, inventory):
        """The ``oom`` message (dict) for a cell that failed with a CUDA out-of-memory error:
        figures parsed from the message, NVML and torch now, and what the inventory says
        holds memory on that device."""
        text = _describe(exc)
        kind = type(exc).__name__
        message = text[len(kind) + 2 :] if text.startswith(kind + ": ") else text
        try:
            full = str(exc)
        except Exception:
            full = message
        parsed = parse_oom_message(full)
        torch = _torch()
        index = parsed["gpu"]
        if index is None and _cuda_initialized(torch):
            with contextlib.suppress(Exception):
                index = int(torch.cuda.current_device())
        if index is None and self.devices.devices:
            index = self.devices.devices[0][0]
        device = f"cuda:{index}" if index is not None else None
        nvml = self.devices.processes(index) if index is not None else None
        process = None
        others = []
        free = parsed["free"]
        total = parsed["total"]
        if nvml is not None:
            dev_free, dev_total, procs = nvml
            free = dev_free if free is None else free
            total = dev_total if total is None else total
            for pid, used in procs:
                if pid == self.pid:
                    process = (process or 0) + used if used is not None else process
                else:
                    others.append({"pid": pid, "used": used})
        memory = self._torch_memory() or {}
        allocated, reserved = memory.get(device, (None, None))

        def on_device(by_device):
            return int(by_device.get(device, 0)) if device is not None else 0

        stale = []
        for model in inventory.get("models", ()):
            if model.get("stale"):
                nbytes = on_device(model["bytes"]) + sum(
                    on_device(p["bytes"]) for p in model.get("parts", ())
                )
                stale.append({"id": model["id"], "label": model["label"], "bytes": nbytes})
        last_error = inventory.get("lastError")
        ultralytics = sys.modules.get("ultralytics")
        version = getattr(ultralytics, "__version__", None) if ultralytics else None
        torch_version = getattr(torch, "__version__", None) if torch is not None else None
        return {
            "protocol": PROTOCOL,
            "type": "oom",
            "executionCount": execution_count,
            "errorType": _short(kind),
            "message": _short(message),
            "device": device,
            "requested": parsed["requested"],
            "free": free,
            "total": total,
            "process": process,
            "processes": others[:64],
            "allocated": allocated,
            "reserved": reserved,
            "stale": stale[:MAX_MODELS],
            "traceback": on_device(last_error["bytes"]) if last_error else 0,
            "graphs": sum(on_device(g["bytes"]) for g in inventory.get("graphs", ())),
            "torch": _short(str(torch_version), 64) if torch_version is not None else None,
            "ultralytics": _short(str(version), 64) if version is not None else None,
        }

    # ---- clean

    def _torch_memory(self):
        """{device: (allocated, reserved)} in bytes when CUDA is initialised, else None."""
        torch = _torch()
        if not _cuda_initialized(torch):
            return None
        out = {}
        for index in range(torch.cuda.device_count()):
            out[f"cuda:{index}"] = (
                int(torch.cuda.memory_allocated(index)),
                int(torch.cuda.memory_reserved(index)),
            )
        return out

    def _clean_snapshot(self):
        tops, _parent = self._models()
        models = []
        for module, _order in tops:
            try:
                _count, storages, has_tensors = model_stats(module)
            except Exception as exc:
                self.error("clean", exc)
                continue
            if has_tensors:
                models.append((weakref.ref(module), _bytes_by_device(storages)))
        del tops, _parent
        return {"models": models, "memory": self._torch_memory()}

    def _cleaned(self, snapshot, execution_count):
        tops, _parent = self._models()
        after = 0
        for module, _order in tops:
            try:
                if model_stats(module)[2]:
                    after += 1
            except Exception:
                after += 1
        del tops, _parent
        freed = {}
        for ref, by_device in snapshot["models"]:
            if ref() is None:
                for device, nbytes in by_device.items():
                    freed[device] = freed.get(device, 0) + nbytes
        before_mem = snapshot["memory"]
        after_mem = self._torch_memory()
        allocated = reserved = None
        if after_mem is not None:
            before_mem = before_mem or {}
            allocated = {}
            reserved = {}
            for device, (alloc, res) in after_mem.items():
                b_alloc, b_res = before_mem.get(device, (0, 0))
                allocated[device] = {"before": b_alloc, "after": alloc}
                reserved[device] = {"before": b_res, "after": res}
        return {
            "protocol": PROTOCOL,
            "type": "cleaned",
            "executionCount": execution_count,
            "models": {"before": len(snapshot["models"]), "after": after},
            "freed": freed,
            "allocated": allocated,
            "reserved": reserved,
        }


_UNITS = {"b": 1, "bytes": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
_SIZE = r"(\d+(?:\.\d+)?)\s*(bytes|[KMGT]i?B|B)"


def _size(number, unit):
    """Bytes (int) of e.g. ("20.00", "MiB"); torch prints binary units, "GB" is read as GiB."""
    unit = unit.lower()
    if len(unit) == 2:  # "GB": binary, as torch means it
        unit = unit[0] + "ib"
    return int(float(number) * _UNITS.get(unit, 1))


def parse_oom_message(text):
    """Figures in a CUDA out-of-memory message (dict of int or None): ``requested`` ("Tried
    to allocate 20.00 MiB"), ``gpu`` (the CUDA index in "GPU 0"), ``total`` and ``free``
    (torch >= 2.1: "GPU 0 has a total capacity of 79.19 GiB of which 3.19 MiB is free";
    1.x: "(GPU 0; 15.78 GiB total capacity; ...; 3.19 MiB free; ...)"). Lenient: what is
    missing is None."""
    out = {"requested": None, "gpu": None, "total": None, "free": None}
    if not isinstance(text, str):
        return out
    match = re.search(r"Tried to allocate " + _SIZE, text)
    if match:
        out["requested"] = _size(*match.groups())
    match = re.search(r"GPU (\d+)", text)
    if match:
        out["gpu"] = int(match.group(1))
    match = re.search(r"total capacity of " + _SIZE + r" of which " + _SIZE + " is free", text)
    if match:
        out["total"] = _size(*match.group(1, 2))
        out["free"] = _size(*match.group(3, 4))
    else:
        total = re.search(_SIZE + r" total capacity", text)
        free = re.search(_SIZE + r" free", text)
        if total:
            out["total"] = _size(*total.groups())
        if free:
            out["free"] = _size(*free.groups())
    return out


def _is_cuda_oom(exc):
    """Whether ``exc`` is a CUDA out-of-memory error: ``torch.OutOfMemoryError`` (by class
    name, torch is not imported here) or a message with "CUDA" and "out of memory"."""
    if not isinstance(exc, BaseException):
        return False
    if any(cls.__name__ == "OutOfMemoryError" for cls in type(exc).__mro__):
        return True
    try:
        text = str(exc)
    except Exception:
        return False
    return "out of memory" in text and "CUDA" in text


def _machinery_frame(frame):
    """Whether a traceback frame belongs to IPython/ipykernel's own code (``run_code``), which
    holds no user data and is left out of ``lastError``."""
    try:
        name = frame.f_globals.get("__name__")
    except Exception:
        return False
    return isinstance(name, str) and name.split(".")[0] in ("IPython", "ipykernel")


def _drain(items):
    """Empty a list in place and return its former content (list)."""
    out = list(items)
    del items[:]
    return out


# --------------------------------------------------------------------------------------------
# module API used by the loader


def _sweep(shell):
    """Remove hooks and the comm target left by any other copy of this module (another
    version whose ``uninstall`` failed or did not exist)."""
    for callbacks in list(shell.events.callbacks.values()):
        for fn in list(callbacks):
            func = getattr(fn, "__func__", fn)
            if getattr(func, "__module__", None) == MODULE_NAME:
                with contextlib.suppress(ValueError):
                    callbacks.remove(fn)
    targets = shell.kernel.comm_manager.targets
    fn = targets.get(COMM_TARGET)
    if fn is not None:
        targets.pop(COMM_TARGET, None)


def install(config=None, previous=None):
    """Install the agent in the running IPython kernel; never raises.

    ``config``: dict from the loader (``{"sampleIntervalMs": int}``). ``previous``: the module
    object that was in ``sys.modules`` before the loader ran (or None). A running agent of the
    same version is kept: it gets the config and is repaired if a part is missing, and
    ``previous`` stays in ``sys.modules``. Another version is uninstalled first (its comms are
    closed, so the browser opens a new one). Returns ``"kept"``, ``"installed"`` or
    ``"failed"`` (the error is sent to the first comm that opens).
    """
    global _agent
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None or getattr(shell, "kernel", None) is None:
            raise RuntimeError("not running in an IPython kernel")
        if previous is not None and getattr(previous, "__dict__", None) is not globals():
            prev_agent = getattr(previous, "_agent", None)
            same = getattr(previous, "AGENT_VERSION", None) == AGENT_VERSION
            if same and prev_agent is not None and not prev_agent.stop_event.is_set():
                sys.modules[MODULE_NAME] = previous
                try:
                    prev_agent.configure(config)
                except Exception as exc:
                    prev_agent.error("install", exc)
                prev_agent.ensure()
                return "kept"
            uninstall_previous = getattr(previous, "uninstall", None)
            if callable(uninstall_previous):
                with contextlib.suppress(Exception):
                    uninstall_previous()
        elif _agent is not None and not _agent.stop_event.is_set():
            # install() called again on this very module object
            try:
                _agent.configure(config)
            except Exception as exc:
                _agent.error("install", exc)
            _agent.ensure()
            return "kept"
        _sweep(shell)
        agent = Agent(shell, None)
        try:
            agent.configure(config)
        except Exception as exc:
            _install_errors.append(("install", _describe(exc)))
        _agent = agent
        agent.start()
        return "installed"
    except Exception as exc:
        if len(_install_errors) < MAX_PENDING_ERRORS:
            _install_errors.append(("install", _describe(exc)))
        return "failed"


def uninstall():
    """Stop the running agent of this module (hooks, comm target, thread, comms); never
    raises."""
    global _agent
    agent, _agent = _agent, None
    if agent is not None:
        with contextlib.suppress(Exception):
            agent.stop()
