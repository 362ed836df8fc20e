"""Building the ``inventory`` message: reuse the last one while the fingerprint is unchanged,
else walk the roots and take the census. Also the caches that make the next one cheap (forest,
``model_stats``, fruitless roots and graph searches, module dicts)."""

import contextlib
import gc
import itertools
import os
import sys
import time
from typing import NamedTuple

from . import (
    allocator,
    census,
    children,
    degrade,
    fingerprint,
    hooks,
    lasterror,
    models,
    namespace,
    outside,
    peek,
    provenance,
    roots,
    walk,
    workers,
)
from .limits import PROTOCOL
from .storage import storage_of
from .util import contained, cuda_initialized, torch_module, vars_of

# A re-sent (skipped) inventory reads the child processes again at most this often (seconds); a
# fresh one always does.
CHILDREN_REFRESH_S = 1.0


def no_torch_function():
    """A context in which torch calls no ``__torch_function__``, neither of a tensor subclass
    nor of a torch function mode the user entered and left open (torch's
    ``DisableTorchFunction``, thread-local; ``DisableTorchFunctionSubclass`` where it lacks
    it): reading a user's tensor through torch's C accessors (``storage.Reads``, ``.grad``)
    then runs none of their Python code. A null context without torch or on a torch that
    lacks both."""
    torch = torch_module()
    state = vars_of(torch).get("_C") if torch is not None else None
    names = vars_of(state) if state is not None else {}
    disable = names.get("DisableTorchFunction") or names.get("DisableTorchFunctionSubclass")
    return disable() if disable is not None else contextlib.nullcontext()


def value_ids(rows, variables):
    """Give each of ``rows`` (dicts with a ``name``) that names a user variable the
    ``valueId`` of what that variable held when the inventory was built (``hex(id(value))``):
    a fix cell acts on a name only while it still holds that very object (``variables``:
    [(name, value)], the roots; exact str names only)."""
    if not rows:
        return
    ids = {name: id(value) for name, value in variables}
    for row in rows:
        found = ids.get(row.get("name"))
        if found is not None:
            row["valueId"] = hex(found)


def mark_copies(entries, copied):
    """Set ``copied: true`` on the ``models`` entries (dicts) whose module the tracker found
    made without its constructor (``copied``: {id(module): order}; an entry's ``id`` is
    ``<hex address>-<order>``)."""
    if not copied:
        return
    for entry in entries:
        address, _, order = entry["id"].rpartition("-")
        try:
            if copied.get(int(address, 16)) == int(order):
                entry["copied"] = True
        except ValueError:
            continue


def variable_rows(message):
    """The rows of an inventory ``message`` that name a user variable a fix cell acts on
    (list of dicts): the ``variable`` holders of its models, its ``roots`` of kind
    ``variable`` (Move to CPU, Delete), its ``graphs`` held by variables (Fix: detach; an
    output-cache entry's carries the ``valueId`` of its object already), its ``keptErrors``
    and its ``optimizers`` (Delete)."""
    rows = [
        holder
        for entry in message.get("models") or ()
        for holder in entry.get("holders", ())
        if holder.get("kind") == "variable"
    ]
    rows.extend(row for row in message.get("roots") or () if row.get("kind") == "variable")
    rows.extend(row for row in message.get("graphs") or () if row.get("root") != "output")
    rows.extend(message.get("keptErrors") or ())
    rows.extend(message.get("optimizers") or ())
    return rows


@contextlib.contextmanager
def collector_paused():
    """A context in which Python's cyclic garbage collector does not run (``gc.disable()``,
    then ``gc.enable()`` again; left alone where it was already off). An inventory allocates
    and frees many small objects (one fingerprint entry a variable): left on, the collector
    runs full (generation 2) collections in the middle of it, each a pass over every object of
    the kernel (150 ms with 260,000 objects here, half of a 10,000-variable inventory). What
    the inventory frees is freed by reference counting; the collector's next pass comes with
    the user's next allocations, as it would without the agent. A thread of the user's that
    calls ``gc.disable()`` during those milliseconds has it enabled again at their end."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# More unattributed CUDA memory than at the last full read that makes a partial read of a large
# namespace read every name (bytes).
UNATTRIBUTED_SLACK = 1 << 20


def more_unattributed(message, before):
    """Whether an inventory ``message`` finds, on some device, more than ``UNATTRIBUTED_SLACK``
    bytes more CUDA memory that no root reaches than ``before`` ({device: bytes})."""
    return any(
        nbytes > before.get(device, 0) + UNATTRIBUTED_SLACK
        for device, nbytes in (message.get("unattributed") or {}).items()
    )


class LastInventory(NamedTuple):
    fingerprint: tuple  # fingerprint.fingerprint() right after it was built
    message: dict
    root_storages: object  # census.Census.root_storages (None: built without provenance)


class RootWalk(NamedTuple):
    """What walking every root gave."""

    roots: list  # [(kind, name, Reach)] in attribution order
    variables: list  # the user variables [(name, value)]
    last_error: object  # the ``lastError`` dict or None
    truncated: bool  # a walk bound was hit
    forest: object  # the models.Forest the walk expanded models by (None without torch)
    changes: int  # the tracker's ``changes`` when that forest was taken
    cells: dict  # (kind, name) of an output root -> set of the execution counts it shows
    skip: object  # ids of the objects the walk never enters (roots.skip_ids)


class Inventory:
    """Builds inventories for one shell and tracker. ``own_ids``: ids of the agent's objects
    (never walked); ``on_error(exc)``: reports a failure (an ``error`` message)."""

    def __init__(self, shell, tracker, own_ids, on_error):
        self.shell = shell
        self.tracker = tracker
        self.names = namespace.NamespaceIndex()  # the roots of a large namespace
        # never walked: the inventory itself and the index, whose ``pairs`` hold the user's
        # values while an inventory is built (a frame that keeps this object must not make
        # them look held twice)
        self.own_ids = frozenset(own_ids) | {id(self), id(self.names)}
        # what no variable named at the last full read of a large namespace: models
        # ({model id: sys.getrefcount}, ``suspects``), CUDA bytes per device
        # (``more_unattributed``)
        self.unnamed = {}
        self.unattributed = {}
        self.on_error = on_error
        self.seq = itertools.count(1)
        self.last = None  # LastInventory of the last full inventory, or None
        self.forests = models.ForestCache(tracker)
        self.stats = models.StatsCache(tracker)
        self.module_dicts = roots.ModuleDicts()
        self.fruitless = {}  # (kind, name) -> shallow signature of a cut walk that found nothing
        self.graphless = {}  # variable name -> signature of a cut graph search that found nothing
        self.pid = os.getpid()
        # () -> set of the pids NVML lists on any device, or None (set by the agent)
        self.nvml_pids = None
        self.children_read = 0.0  # perf_counter() of the last read of the child processes
        self.orphans = None  # orphaned DataLoader workers: one /proc scan, then re-checked
        # full collections (a gc.callbacks entry, installed by the agent's start) and, per model
        # id no root reached, (that count when it was searched, its holder or None, the count
        # when it was first seen): ``mark_outside``
        self.collections = outside.FullCollections()
        self.recorder = provenance.Recorder()  # opt-in allocation stacks (``provenance``)
        # census.Census.root_storages of the last fresh inventory (None: built without origins)
        self.root_storages = None
        self.outside = {}

    def build(self, execution_count, reuse=False, source=None):
        """The ``inventory`` message (dict), or None when building it failed (``on_error`` was
        called instead). ``reuse``: when nothing the inventory depends on changed since the
        last one (the fingerprint), re-send that one (``skipped: true``). ``source``: the text
        of the cell just run (with ``reuse``): what a large namespace reads again
        (``namespace``); None reads every name."""
        started = time.perf_counter()
        try:
            with no_torch_function(), collector_paused():
                self.names.refresh(self.shell, source if reuse else None)
                return self._build(execution_count, reuse, started)
        except Exception as exc:
            self.last = None
            self.on_error(exc)
            return None
        except BaseException:  # the user's interrupt (``guard``): stop here, build anew next time
            self.last = None
            raise
        finally:
            self.names.release()

    def _build(self, execution_count, reuse, started):
        current = self.fingerprint()
        last = self.last
        # origins are re-read on a re-sent inventory from the roots' storages of the last
        # fresh one: not when that one was built before recording began
        origins_known = not self.recorder.on or last is None or last.root_storages is not None
        if reuse and last is not None and current == last.fingerprint and origins_known:
            message = dict(last.message)
            # processes come and go without a change of the fingerprint: read them again
            # (at most every CHILDREN_REFRESH_S for a re-sent inventory), and the allocator
            if started - self.children_read >= CHILDREN_REFRESH_S:
                message["children"] = self.children(None)
            message["allocator"] = allocator.allocator_fact()
            reading = self.recorder.read(self.shell, torch_module())
            if reading is not None:
                message["provenance"] = reading.fact
            else:  # off (or turned off since): say nothing of origins
                message.pop("provenance", None)
            if last.root_storages is not None:
                # the same roots keep the same storages; what is alive where may have moved
                # (rows copied: the last message's stay as they were sent)
                message["roots"] = [dict(row) for row in message["roots"]]
                census.add_origins(
                    message["roots"],
                    last.root_storages,
                    reading.origin_of if reading is not None else {},
                )
            message["limits"] = degrade.current()
            self.namespace_fact(message)
            message.update(
                t=time.time(),
                seq=next(self.seq),
                executionCount=execution_count,
                durationMs=(time.perf_counter() - started) * 1000.0,
                skipped=True,
            )
            return message
        self.last = None
        # after a user cell: what changed since the last inventory narrows what is
        # re-checked (``census.build``); a requested inventory re-checks everything
        since = None
        if reuse and last is not None:
            since = fingerprint.since(last.fingerprint, current)
        message = self.fresh(execution_count, started, since)
        if self.names.active:
            suspects = self.suspects(message)
            if not self.names.full and (
                any(self.unnamed.get(key) != count for key, count in suspects.items())
                or more_unattributed(message, self.unattributed)
            ):
                # after a partial read of a large namespace: a model that no variable names
                # (stale, or reached by nothing) and that the last full read did not find so,
                # or whose references changed since, or CUDA memory that no root reaches,
                # more than then: read every name before saying so
                self.names.refresh(self.shell)
                current = self.fingerprint()
                message = self.fresh(execution_count, started)
                suspects = self.suspects(message)
            unattributed = message.get("unattributed") or {}
            if self.names.full:
                self.unnamed = suspects
                self.unattributed = dict(unattributed)
            else:  # what a partial read confirms lowers the marks
                self.unnamed = {k: v for k, v in self.unnamed.items() if k in suspects}
                self.unattributed = {
                    d: min(b, unattributed.get(d, 0)) for d, b in self.unattributed.items()
                }
            # while a model is unnamed, read the whole namespace every FULL_EVERY cells: a
            # name bound out of sight (a thread) that left its references as they were
            self.names.watch = bool(self.unnamed)
        # the fingerprint after the walk: the walk itself adds unpickled models
        after = fingerprint.refreshed(current, self.tracker, self.stats)
        self.last = LastInventory(after, message, self.root_storages)
        return message

    def fingerprint(self):
        return fingerprint.fingerprint(self.shell, self.tracker, self.stats, self.names)

    def variables(self, skips=None):
        """The user variables that are roots ([(name, value)]): ``roots.variable_roots``, or
        the roots of a large namespace as this inventory read them (``namespace``)."""
        if self.names.active and self.names.pairs is not None:
            return self.names.pairs
        return roots.variable_roots(self.shell, skips)

    def fresh(self, execution_count, started, since=None):
        """A newly built ``inventory`` message (dict). ``since``: a ``fingerprint.Since`` from
        the last inventory (what a cell changed), or None: every model re-checked in full."""
        torch = torch_module()
        cuda = cuda_initialized(torch)
        roots.note_shell_gaps(self.shell)  # a shell changed since the start (``holders``)
        # before the walk: its reads allocate nothing on a device, and the census needs it
        reading = self.recorder.read(self.shell, torch)
        # only while recording: the roots' storages are then kept for re-sent inventories
        recording = reading is not None and reading.fact.get("recording") is True
        origin_of = reading.origin_of if recording else None
        self.root_storages = None  # the roots' storages, when origins are asked for
        skips = peek.Skips()
        walked = self.walk_roots(torch, skips)
        truncated = walked.truncated
        found = None
        if torch is not None:
            found = self.take_census(walked, torch, cuda, since, origin_of)
            self.root_storages = found.root_storages if origin_of is not None else None
            truncated = truncated or found.cut
        message = {
            "protocol": PROTOCOL,
            "type": "inventory",
            "t": time.time(),
            "seq": next(self.seq),
            "executionCount": execution_count,
            "durationMs": (time.perf_counter() - started) * 1000.0,
            "skipped": False,
            "torchImported": torch is not None,
            "cudaInitialized": cuda,
            "truncated": bool(truncated),
            "models": found.models if found else [],
            "lastError": walked.last_error,
            "roots": found.roots if found else [],
            "unattributed": found.unattributed if found else {},
            "tensors": found.tensors if found else [],
            "graphs": found.graphs if found else [],
            "allocator": allocator.allocator_fact(),
            "children": self.children(walked.variables),
            "owners": found.owners if found else [],
            "keptErrors": found.kept_errors if found else [],
            "optimizers": found.optimizers if found else [],
            "limits": degrade.current(),
            "unread": skips.fact(),
        }
        if reading is not None:
            message["provenance"] = reading.fact
        held = [g for g in message["graphs"] if g.get("root") != "output"]
        if torch is not None and held:
            hooks.feeding_hooks(held, walked.variables, self.shell.user_ns, torch.nn.Module)
        value_ids(variable_rows(message), walked.variables)
        mark_copies(message["models"], self.tracker.copied)
        if walked.forest is not None:
            self.mark_outside(message["models"], walked.forest[0])
        self.namespace_fact(message)
        return message

    def mark_outside(self, entries, tops):
        """Set ``outside`` on the ``models`` entries (dicts) that no root reaches but that are
        no garbage: ``{"holder": what keeps it (``outside.find_holders``) or None, "survived":
        it was unreached before a full collection and is alive after it}``. A model is searched
        when first seen unreached and, if no holder was found, once more after the first full
        collection it survives (``tops``: the forest's LiveModules); the rest reuse the last
        search (a search scans the heap: a holder once found, or none found twice, is kept
        while the model stays unreached)."""
        hidden = {
            e["id"]: e
            for e in entries
            if e["stale"] and all(h["kind"] == "hidden" for h in e["holders"])
        }
        if not hidden:
            self.outside = {}
            return
        count = self.collections.count
        memo = self.outside
        searched = {}  # model id -> id(module), of the models searched now
        todo = []
        module = None
        for module, order in tops:
            key = census.model_id(module, order)
            # searched when first seen, and once more after the first full collection it
            # survived if no holder was found then (each search scans the heap up to 8 times:
            # not after every collection while a thread's local keeps a model)
            last = memo.get(key)
            if key in hidden and (
                last is None or (last[1] is None and last[0] != count and last[0] == last[2])
            ):
                searched[key] = id(module)
                todo.append(module)
        found = outside.find_holders(todo, self.shell.user_ns) if todo else {}
        del todo, module
        self.outside = fresh = {}
        for key, entry in hidden.items():
            last = memo.get(key)  # None: a model outside ``tops`` (a forest rebuilt meanwhile)
            first = last[2] if last is not None else count
            holder = found.get(searched[key]) if key in searched else last and last[1]
            fresh[key] = (count, holder, first)
            if holder is not None or count > first:
                entry["outside"] = {"holder": holder, "survived": count > first}

    def suspects(self, message):
        """{model id: ``sys.getrefcount`` of the module} of the models an inventory
        ``message`` says no variable names (stale, or reached by nothing): what a partial read
        of a large namespace could get wrong. A reference count that changed since the last
        full read (a name bound by a callback or a function of another module) calls for a
        full read."""
        wanted = {
            entry["id"]
            for entry in message.get("models") or ()
            if not any(
                h.get("kind") == "variable" and not h.get("submodule")
                for h in entry.get("holders") or ()
            )
        }
        if not wanted:
            return {}
        found = {}
        for module, order in self.forests.forest().tops:
            key = census.model_id(module, order)
            if key in wanted:
                found[key] = sys.getrefcount(module)
        return found

    def namespace_fact(self, message):
        """Set the ``namespace`` of ``message`` where the namespace is large (``namespace``):
        ``{"names": names in user_ns, "read": names read for this inventory, "roots": user
        variables that can hold something, "cycle": cells within which every name is read
        again}``; remove it otherwise."""
        names = self.names
        if names.active:
            message["namespace"] = {
                "names": names.size,
                "read": names.read,
                "roots": len(names.roots),
                "cycle": -(-names.size // namespace.SLICE_NAMES),
            }
        else:
            message.pop("namespace", None)

    def scan_orphans(self):
        """Look once for DataLoader workers a previous kernel left running (one pass over
        ``/proc``, ~1 ms for 150 processes); later inventories only re-check those."""
        self.orphans = children.orphan_workers()

    def children(self, variables):
        """The ``children`` fact (``children.children_fact``): the kernel's child processes and
        the user variables and output-cache entries that keep DataLoader workers alive
        (``variables``: the user variables, None to list them again)."""
        self.children_read = time.perf_counter()
        shell = self.shell

        def pairs():  # only when some child is alive, or none can be listed (children_fact)
            if workers.DATALOADER_MODULE not in sys.modules:
                return []
            named = self.variables() if variables is None else variables
            return [("variable", named), ("output", roots.output_roots(shell, self.names.active))]

        if self.orphans is None:
            self.scan_orphans()
        elif self.orphans:
            self.orphans = children.still_running(self.orphans)
        fact = children.children_fact(self.pid, pairs, self.nvml_pids, orphans=self.orphans)
        held = [h for h in fact.get("holders") or () if h.get("kind") == "variable"]
        if held:  # Drop workers acts on these names (``value_ids``)
            value_ids(held, self.variables() if variables is None else variables)
        return fact

    def walk_roots(self, torch, skips=None):
        """``RootWalk``: the user variables and the output cache (only once torch is
        imported: without it nothing can hold a tensor) and the last traceback. A root whose
        walk fails is left out and counted in ``skips`` (a ``peek.Skips``): one odd object
        never blinds the inventory."""
        skips = skips if skips is not None else peek.Skips()
        skip = roots.skip_ids(self.shell, self.own_ids, self.module_dicts)
        optimizer_type = None
        forest = None
        changes = self.tracker.changes
        if torch is not None:
            walker = walk.Walker(torch.Tensor, torch.nn.Module, skip)
            optim = getattr(torch, "optim", None)
            optimizer_type = getattr(optim, "Optimizer", None) if optim is not None else None
            # A model's plain attributes (a trainer, its EMA copy, an optimizer...) are walked
            # too: what hangs off a model is reported as its parts. Known submodules are not
            # expanded.
            forest = self.forests.forest()
            known_parent = forest.parent
            walker.expand_module = lambda module: id(module) not in known_parent
            walker.module_internals = models.module_internals(torch)
        else:
            walker = walk.Walker(None, None, skip)
        found_roots = []
        cells = {}
        variables = self.variables(skips)
        if torch is not None:
            self._walk_named(walker, variables, found_roots, optimizer_type, cells, skips)
        else:
            self.fruitless = {}
        walker.start_phase()
        last_error = lasterror.walk_last_error(
            self.shell, walker, found_roots, optimizer_type, skips
        )
        truncated = walker.truncated
        walker.expand_module = None
        walker.parents = {}
        return RootWalk(found_roots, variables, last_error, truncated, forest, changes, cells, skip)

    def _walk_named(self, walker, variables, found_roots, optimizer_type, cells, skips):
        """Walk the user variables, then the output cache, one phase each; fills ``cells``
        ({(kind, name): set of execution counts}) for the output roots."""
        fruitless = {}  # (kind, name) -> shallow(value): cut walks that found nothing
        shallow = fingerprint.shallow
        cell_of = roots.output_cells(self.shell)
        outputs = roots.output_roots(self.shell, self.names.active)
        for kind, pairs in (("variable", variables), ("output", outputs)):
            walker.start_phase()
            for name, value in pairs:
                if kind == "output":
                    cells.setdefault((kind, name), set()).update(cell_of.get(id(value), ()))
                # A root whose last walk hit a bound and found nothing, unchanged one level
                # deep since: not walked again (its figures were a lower bound already).
                memo = (kind, name)
                sig = shallow(value)
                if self.fruitless.get(memo) == sig:
                    walker.truncated = True
                    fruitless[memo] = sig
                    continue
                try:
                    found = walker.reach(value, storage_of, optimizer_type)
                except BaseException as exc:  # kept to this root (util.contained)
                    if not contained(exc):
                        raise
                    skips.add("walk failed")
                    continue
                found_roots.append((kind, name, found))
                if not found.complete and not found.modules and not found.storages:
                    fruitless[memo] = sig
            del pairs
        self.fruitless = fruitless

    def take_census(self, walked, torch, cuda, since=None, origin_of=None):
        """The ``census.Census`` of what the roots reach (``since``: as ``fresh``;
        ``origin_of``: ``census.build``'s)."""
        tracker = self.tracker
        for _kind, _name, found in walked.roots:
            for reached in found.modules:
                # models the hooks never saw being built: a deepcopy, an unpickled model
                tracker.add(reached.module, copied=True)
        forest = walked.forest
        if walked.changes != tracker.changes:
            forest = self.forests.forest()  # the walk found modules the hooks missed
        result = census.build(
            walked.roots,
            walked.truncated,
            cuda,
            torch,
            walked.variables,
            forest,
            self.stats,
            self.graphless,
            self.on_error,
            cells=walked.cells,
            skip=walked.skip,
            since=since,
            origin_of=origin_of,
        )
        self.graphless = result.graphless
        return result
