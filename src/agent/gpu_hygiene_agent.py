"""Kernel-side agent of jupyterlab-gpu-hygiene (comm protocol 1, see docs/protocol.md).

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

AGENT_VERSION = "0.1.0"
PROTOCOL = 1
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


def _add_storage(tensor, storages):
    """Record the storage of ``tensor`` in ``storages`` ({(device str, data_ptr): nbytes}).

    Meta tensors and empty storages are skipped. Raises what torch raises for tensors without
    a storage (sparse layouts, some subclasses); callers catch.
    """
    device = tensor.device
    if device.type == "meta":
        return
    storage = tensor.untyped_storage()
    ptr = storage.data_ptr()
    nbytes = int(storage.nbytes())
    if ptr == 0 or nbytes == 0:
        return
    storages[(str(device), ptr)] = nbytes


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

    # hooks: they run inside user code (module constructors), so they never raise
    def _on_module(self, module, _name, submodule):
        try:
            self.add(module)
            if submodule is not None:
                self.add(submodule)
        except Exception:
            pass

    def _on_tensor(self, module, _name, _tensor):
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

        def _gone(ref, key=key, refs=refs):
            current = refs.get(key)
            if current is not None and current[0] is ref:
                refs.pop(key, None)

        try:
            ref = weakref.ref(module, _gone)
        except TypeError:
            return
        refs[key] = (ref, next(self._counter))

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


def model_stats(module, on_error=None):
    """Parameters and memory of a module tree.

    Returns (parameters, storages, has_tensors): ``parameters`` the number of elements of the
    unique parameters (int), ``storages`` {(device, data_ptr): nbytes} of the unique storages
    of parameters, buffers and gradients, ``has_tensors`` whether the tree holds at least one
    parameter or buffer. A tensor torch cannot measure (lazy parameter, sparse layout, odd
    subclass) is left out and passed to ``on_error(exception)``.
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
        except Exception as exc:
            if on_error is not None:
                on_error(exc)
    for b in buffers.values():
        try:
            _add_storage(b, storages)
        except Exception as exc:
            if on_error is not None:
                on_error(exc)
    return count, storages, bool(params or buffers)


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
    ``PHASE_VISITS`` and ``PHASE_EXAMINED``. Hitting one sets ``truncated``.
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
        self._modules_from = {}  # id(root) -> (root, [modules]) of module-only walks

    def start_phase(self):
        """Give the next group of roots a fresh phase budget."""
        self._phase_visits = 0
        self._phase_examined = 0

    def modules_from(self, root):
        """Modules reached from ``root`` (list); a root walked before is not walked again."""
        cached = self._modules_from.get(id(root))
        if cached is not None and cached[0] is root:
            return cached[1]
        found = []
        self.walk(root, found.append, _ignore)
        self._modules_from[id(root)] = (root, found)
        return found

    def walk(self, start, on_module, on_tensor):
        """Walk from ``start``; calls ``on_module(module)`` / ``on_tensor(tensor)`` once per
        object reached. Returns False when a bound cut the walk short."""
        tensor_type = self.tensor_type
        module_type = self.module_type
        skip_ids = self.skip_ids
        seen = {id(start)}
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
                        seen.add(id(ref))
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
            refs = self._referents(obj, cls, limit)
            examined += len(refs)
            self._phase_examined += len(refs)
            for ref in refs:
                if type(ref) in _LEAF_TYPES:
                    continue
                key = id(ref)
                if key in seen:
                    continue
                seen.add(key)
                stack.append(ref)
            spent = examined >= ROOT_EXAMINED or self._phase_examined >= PHASE_EXAMINED
            if spent and stack:
                self.truncated = True
                return False
        return True

    def _referents(self, obj, cls, limit):
        """What ``obj`` refers to, by the rules of the class docstring (list, at most about
        ``limit`` items; a cut sets ``truncated``)."""
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
                # a huge container: look at its first items only (no full copy)
                self.truncated = True
                it = itertools.chain.from_iterable(obj.items()) if cls is dict else iter(obj)
                return list(itertools.islice(it, max(limit, 0)))
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

    ``devices``: [(cuda index, NVML handle, name, total bytes, uuid)] for the CUDA devices NVML
    sees, in ``CUDA_VISIBLE_DEVICES`` order. ``nvml``: the pynvml module when initialised, else
    None, and then ``nvml_error`` (str) says why.
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
                devices.append((cuda_index, handle, name, total, uuids[nvml_index]))
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

    def describe(self):
        """Devices for ``hello``: [{index, name, total (bytes), uuid}]."""
        return [
            {"index": index, "name": name, "total": total, "uuid": uuid}
            for index, _handle, name, total, uuid in self.devices
        ]

    def sample(self, on_error=None):
        """Per-device figures for ``sample`` (list of dicts sorted by CUDA index): ``used`` /
        ``total`` device memory and ``process`` (this pid's share) from NVML, ``allocated`` /
        ``reserved`` from torch; bytes, None where not measurable. NVML failures are passed to
        ``on_error(exception)``."""
        devices = {}
        nvml = self.nvml
        for index, handle, _name, total, _uuid in self.devices if nvml is not None else ():
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
        return [devices[i] for i in sorted(devices)]


# --------------------------------------------------------------------------------------------
# the agent


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
        """``pre_run_cell``: busy; snapshot models before a clean cell."""
        try:
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
        """``post_run_cell``: idle; send ``inventory`` (and ``cleaned`` after a clean cell)."""
        try:
            self.busy = False
            self.wake_event.set()
            snapshot, self.clean_snapshot = self.clean_snapshot, None
            if not self.comms:
                return
            self.ensure_tracking()
            count = getattr(result, "execution_count", None)
            count = count if isinstance(count, int) and not isinstance(count, bool) else None
            inventory = self.build_inventory(count)
            if inventory is not None:
                self.broadcast(inventory)
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

    def build_inventory(self, execution_count):
        """The ``inventory`` message (dict), or None when building it failed (an ``error``
        message was sent instead)."""
        started = time.perf_counter()
        try:
            return self._inventory(execution_count, started)
        except (Exception, KeyboardInterrupt) as exc:
            self.error("inventory", exc)
            return None

    def _models(self):
        """Top-level models: (tops, parent) from ``module_forest`` over the tracked modules;
        strong references, drop them before returning to the user."""
        return module_forest(self.tracker.live())

    def _inventory(self, execution_count, started):
        torch = _torch()
        cuda = _cuda_initialized(torch)
        shell = self.shell
        models = []
        found = {}  # id(module) -> module reached by the walk
        holders = {}  # id(module) -> {(kind, name): None} in discovery order

        def reach(kind, name):
            def on_module(module):
                found[id(module)] = module
                holders.setdefault(id(module), {})[(kind, name)] = None

            return on_module

        if torch is not None:
            walker = Walker(torch.Tensor, torch.nn.Module, self._skip_ids())
            # A model's plain attributes (a trainer, its EMA copy, an optimizer...) are walked
            # too, so models hanging off a model count as held by the same names. Known
            # submodules are not expanded.
            _tops, known_parent = self._models()
            walker.expand_module = lambda module: id(module) not in known_parent
            walker.module_internals = _module_internals(torch)
            del _tops
            for kind, roots in (
                ("variable", self._variable_roots(shell)),
                ("output", self._output_roots(shell)),
            ):
                walker.start_phase()
                for name, value in roots:
                    on_module = reach(kind, name)
                    for module in walker.modules_from(value):
                        on_module(module)
                del roots
        else:
            walker = Walker(None, None, self._skip_ids())
        walker.start_phase()
        last_error = self._walk_last_error(shell, walker, reach)
        truncated = walker.truncated
        walker.expand_module = None
        if torch is not None:
            for module in found.values():
                self.tracker.add(module)  # e.g. unpickled models the hooks never saw
            tops, parent = self._models()
            owner_holders = {}
            for key, pairs in holders.items():
                owner = found[key]
                hops = 0
                while id(owner) in parent and hops < 10000:
                    owner = parent[id(owner)]
                    hops += 1
                bucket = owner_holders.setdefault(id(owner), {})
                for pair in pairs:
                    bucket[pair] = None
            found.clear()
            for module, order in tops:
                try:
                    entry = self._model_entry(
                        module, order, owner_holders.get(id(module), {}), truncated
                    )
                except Exception as exc:
                    self.error("inventory", exc)
                    continue
                if entry is not None:
                    models.append(entry)
            del tops, parent
            if len(models) > MAX_MODELS:
                # keep the largest; the rest is said to be cut
                models.sort(key=lambda m: sum(m["bytes"].values()), reverse=True)
                del models[MAX_MODELS:]
                models.sort(key=lambda m: m["order"])
                truncated = True
        return {
            "protocol": PROTOCOL,
            "type": "inventory",
            "t": time.time(),
            "seq": next(self.inventory_seq),
            "executionCount": execution_count,
            "durationMs": (time.perf_counter() - started) * 1000.0,
            "torchImported": torch is not None,
            "cudaInitialized": cuda,
            "truncated": bool(truncated),
            "models": models,
            "lastError": last_error,
        }

    def _model_entry(self, module, order, holder_pairs, truncated=False):
        cls = type(module)
        class_name = getattr(cls, "__name__", "Module")
        cls_module = getattr(cls, "__module__", "") or ""
        if not isinstance(cls_module, str):
            cls_module = ""
        parameters, storages, has_tensors = model_stats(module, self._inventory_error)
        if not has_tensors:
            return None
        family = model_family(cls_module)
        kinds_order = {"variable": 0, "output": 1, "traceback": 2}
        pairs = sorted(holder_pairs, key=lambda p: kinds_order.get(p[0], 3))
        holders = [{"kind": kind, "name": _short(name)} for kind, name in pairs[:MAX_HOLDERS]]
        unknown = False
        if not holders:
            # Nothing reached it. After a cut walk that proves nothing: a name may still hold it,
            # so it is not called stale (nothing offers to free it).
            unknown = truncated
            holders = [{"kind": "hidden", "name": UNKNOWN_HOLDER if unknown else HIDDEN_HOLDER}]
        return {
            "id": hex(id(module)),
            "order": order,
            "className": _short(class_name),
            "module": _short(cls_module),
            "family": family,
            "label": _short(model_label(module, class_name, family)),
            "parameters": parameters,
            "bytes": _bytes_by_device(storages),
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
        for module in list(sys.modules.values()):
            if issubclass(type(module), types.ModuleType):
                for ref in gc.get_referents(module):
                    if type(ref) is dict:
                        skip.add(id(ref))
        return skip

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

    def _walk_last_error(self, shell, walker, reach):
        """Walk the last traceback: model holders named ``last traceback (<frame>)`` and the
        ``lastError`` dict (or None when there is no last exception)."""
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
            storages = {}

            def on_tensor(tensor, storages=storages):
                try:
                    _add_storage(tensor, storages)
                except Exception as exc:
                    self.error("inventory", exc)

            walker.walk(frame, reach("traceback", f"last traceback ({name})"), on_tensor)
            total.update(storages)
            frame_entries.append(
                {
                    "name": _short(name),
                    "bytes": _bytes_by_device(storages),
                    "tensors": len(storages),
                }
            )
        innermost = frames[-1].f_code.co_name if frames else "exception"
        exc_storages = {}

        def on_exc_tensor(tensor):
            try:
                _add_storage(tensor, exc_storages)
            except Exception as exc:
                self.error("inventory", exc)

        for exc in excs:
            walker.walk(exc, reach("traceback", f"last traceback ({innermost})"), on_exc_tensor)
        total.update(exc_storages)
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
