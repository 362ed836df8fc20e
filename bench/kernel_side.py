"""Bench-only instrumentation that runs inside the benchmark kernels (not part of the extension).

``bench/bench.py`` sends this file as text in a *silent* execute request and runs it in its own
module object ``_gpu_hygiene_bench`` in ``sys.modules``, the way the agent's loader does: nothing
lands in the user namespace that the agent walks, and silent requests fire no
``pre_run_cell``/``post_run_cell`` hook. The driver calls its functions through silent requests
(``__import__('sys').modules['_gpu_hygiene_bench'].<function>(...)``).

What it adds to the kernel: perf_counter wrappers around already registered IPython callbacks
(the agent's, ipyexperiments' CellLogger's), the user data set, and timers for ``agent.sample()``,
a naive heap scan, the sampler thread's CPU time, and a profile of the agent's inventory.
"""

import cProfile
import gc
import io
import json
import os
import pstats
import sys
import threading
import time

AGENT_MODULE = "_jupyterlab_gpu_hygiene_agent"  # the agent's package in sys.modules

_times = {}  # timer name -> [milliseconds]
_keep = {}  # objects this module keeps alive (the ipyexperiments logger)


def _shell():
    from IPython import get_ipython

    return get_ipython()


def _agent_module():
    return sys.modules[AGENT_MODULE]


def agent():
    return _agent_module()._agent


def _ms(seconds):
    return seconds * 1000.0


def _timed(name, fn):
    """``fn`` wrapped: wall time (perf_counter) under ``name``, the calling thread's CPU time
    (thread_time) under ``name + "_cpu"``, both in ms."""
    bucket = _times.setdefault(name, [])
    cpu_bucket = _times.setdefault(name + "_cpu", [])
    clock = time.perf_counter
    cpu_clock = time.thread_time

    def timed(*args, **kwargs):
        started = clock()
        cpu_started = cpu_clock()
        try:
            return fn(*args, **kwargs)
        finally:
            cpu_bucket.append(_ms(cpu_clock() - cpu_started))
            bucket.append(_ms(clock() - started))

    timed.__wrapped__ = fn
    return timed


def wrap_hooks(owner, prefix):
    """Replace each IPython event callback that is a bound method of ``owner`` by a timed
    wrapper (in place, same position); its times go to ``<prefix>_<event>``. Returns the event
    names wrapped."""
    wrapped = []
    for event, callbacks in _shell().events.callbacks.items():
        for i, fn in enumerate(callbacks):
            if getattr(fn, "__self__", None) is owner:
                callbacks[i] = _timed(f"{prefix}_{event}", fn)
                wrapped.append(event)
    return wrapped


def wrap_agent():
    return wrap_hooks(agent(), "agent")


def take(name):
    """The times recorded under ``name`` since the last take (list of ms)."""
    bucket = _times.setdefault(name, [])
    out = list(bucket)
    del bucket[:]
    return out


def clear():
    """Forget every time recorded so far."""
    for bucket in _times.values():
        del bucket[:]


def count_objects():
    return len(gc.get_objects())


def make_records(n):
    """A data set like a detection notebook's annotations (COCO-like records: a dict and a bbox
    list each, two gc-tracked objects), grown until ``len(gc.get_objects())`` rose by ``n``.
    Returns the list; ``records_added()`` says how many objects it added and the total."""
    gc.collect()
    base = len(gc.get_objects())
    records = []

    def grow(count):
        start = len(records)
        for i in range(start, start + count):
            records.append(
                {
                    "id": i,
                    "image": f"img_{i // 8:07d}.jpg",
                    "category": i % 80,
                    "bbox": [float(i % 640), float(i % 480), 32.0 + i % 7, 48.0 + i % 5],
                    "iscrowd": 0,
                }
            )

    grow(max(n // 2 - 8, 0))
    while True:
        added = len(gc.get_objects()) - base
        if added >= n:
            _keep["records"] = (added, base + added)
            return records
        grow(max((n - added) // 2, 1))


def records_added():
    """(objects added, objects in total) of the last ``make_records``."""
    return _keep["records"]


def time_sample(reps):
    """``agent.sample()`` timed ``reps`` times in the calling (main) thread (list of ms)."""
    sample = agent().sample
    clock = time.perf_counter
    out = []
    for _ in range(reps):
        started = clock()
        sample()
        out.append(_ms(clock() - started))
    return out


def naive(reps):
    """The naive full scan: ``gc.get_objects()`` and an isinstance pass for torch.nn.Module.
    Returns (wall ms, CPU ms of the main thread, modules found)."""
    module_type = sys.modules["torch"].nn.Module
    clock = time.perf_counter
    out = []
    cpu = []
    found = 0
    for _ in range(reps):
        started = clock()
        cpu_started = time.thread_time()
        objects = gc.get_objects()
        found = sum(1 for obj in objects if isinstance(obj, module_type))
        cpu.append(_ms(time.thread_time() - cpu_started))
        out.append(_ms(clock() - started))
        del objects
    return out, cpu, found


# ---- sampler thread CPU


def _task_ns(tid):
    """CPU time (ns) of one thread of this process: schedstat's on-CPU time, else utime+stime
    from stat (clock ticks)."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
        return ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def cpu_snapshot():
    """{wall (s), sampler (ns), process (ns, all live threads), threads {name: ns}, interval_ms,
    held_back (samples the sampler read and did not send: an idle kernel's, agent 0.16.0)}."""
    a = agent()
    names = {t.native_id: t.name for t in threading.enumerate()}
    threads = {}
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            ns = _task_ns(tid)
        except OSError:
            continue
        total += ns
        name = names.get(int(tid), f"tid {tid}")
        threads[name] = threads.get(name, 0) + ns
    return {
        "wall": time.monotonic(),
        "sampler": _task_ns(a.sampler.thread.native_id),
        "process": total,
        "threads": threads,
        "interval_ms": a.sampler.interval_ms,
        "held_back": getattr(getattr(a, "quiet", None), "skipped", 0),
    }


# ---- ipyexperiments


def start_ipx():
    """ipyexperiments' per-cell logger on the CPU backend (``IPyExperimentsCPU`` with
    ``exp_enable=False``: the CellLogger alone, its defaults: gc.collect() per cell, RSS, a peak
    thread while the cell runs), its hooks timed. Returns (version, events wrapped)."""
    import ipyexperiments

    exp = ipyexperiments.IPyExperimentsCPU(exp_enable=False)
    _keep["ipx"] = exp
    return ipyexperiments.__version__, wrap_hooks(exp.cl, "ipx")


# ---- where the inventory's time goes


def _full_inventory(a):
    """One full inventory (``reuse=False``: never the re-sent one) and its broadcast."""
    inventory = a.build_inventory(None)
    a.broadcast(inventory)
    return inventory


def profile_inventory(reps, top=25):
    """cProfile over ``reps`` full inventories (``agent.build_inventory(None)``, what
    ``post_run_cell`` does after a cell that changed something, then ``broadcast``). Returns
    {walls (ms, profiled), text, rows}; rows are (function, calls per run, tottime ms per run,
    cumtime ms per run), by tottime."""
    a = agent()
    prof = cProfile.Profile()
    clock = time.perf_counter
    walls = []
    for _ in range(reps):
        started = clock()
        prof.enable()
        _full_inventory(a)
        prof.disable()
        walls.append(_ms(clock() - started))
    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    rows = []
    for (filename, line, name), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():
        where = os.path.basename(filename) if filename.startswith("/") else filename
        rows.append(
            (f"{where}:{line}({name})", ncalls / reps, _ms(tottime) / reps, _ms(cumtime) / reps)
        )
    rows.sort(key=lambda r: r[2], reverse=True)
    return {"walls": walls, "text": text.getvalue(), "rows": rows[:top]}


# what is timed on the inventory path, when it exists: (agent submodule, attribute), the
# attribute a module-level function or "Class.method". The agent's modules call these through
# the module attribute (``census.build``, ``walk.Walker``...) or as globals of their own module,
# so shadowing the attribute times every call.
SECTION_TARGETS = (
    ("fingerprint", "fingerprint"),
    ("inventory", "Inventory.fresh"),
    ("roots", "skip_ids"),
    ("models", "ForestCache.forest"),
    ("tracker", "ModuleTracker.live"),
    ("models", "module_forest"),
    ("roots", "variable_roots"),
    ("roots", "output_roots"),
    ("walk", "Walker.reach"),
    ("lasterror", "walk_last_error"),
    ("census", "build"),
    ("models", "model_stats"),
    ("graphs", "graph_holders"),
    ("graphs", "grad_tensors"),
    ("graphs", "graph_bytes"),
    ("census", "model_entry"),
    ("models", "StatsCache.measure"),
    ("census", "collect_parts"),
    ("rootbytes", "tally_roots"),
    ("rootbytes", "root_rows"),
    ("owners", "owner_facts"),
    ("inventory", "Inventory.children"),
    ("children", "read_tree"),
    ("children", "worker_holders"),
    ("transport", "Transport.broadcast"),
    ("inventory", "Inventory.walk_roots"),
    ("inventory", "Inventory.take_census"),
    ("fingerprint", "since"),
    ("fingerprint", "refreshed"),
    ("roots", "output_cells"),
    ("census", "attribute"),
    ("census", "recheck"),
    ("census", "model_entries"),
    ("models", "StatsCache.union"),
    ("models", "tensors_unchanged"),
    ("rootbytes", "sharing"),
    ("agent", "Agent._remember_wrappers"),
    ("agent", "Agent._post_run_cell"),
    ("agent", "Agent._after_cell"),
    ("agent", "Agent.build_inventory"),
    ("agent", "Agent.broadcast"),
    ("agent", "Agent.ensure_tracking"),
    ("inventory", "Inventory.build"),
    ("guard", "guarded"),
    ("agent", "interrupt_cell"),
    ("sampler", "SamplerThread.wake"),
)


def _owner(package, module_name, attr):
    """(object holding the attribute, attribute name) for a ``SECTION_TARGETS`` entry, or
    None when the agent has no such module, class or function."""
    owner = getattr(package, module_name, None)
    *classes, name = attr.split(".")
    for cls in classes:
        owner = getattr(owner, cls, None)
    if owner is None or not callable(vars(owner).get(name)):
        return None
    return owner, name


def sections(reps=3):
    """perf_counter sections of full inventories, without profiler overhead. For the duration of
    the call, each function of ``SECTION_TARGETS`` is shadowed by a timed wrapper (the agent
    module's attribute, or the class attribute; the agent's code is not changed) and put back
    afterwards; only the main thread's calls are counted (the sampler thread broadcasts too).
    Garbage collections during the inventories are timed through ``gc.callbacks``. Returns
    {times: {"<module>.<attribute>": [inclusive ms per inventory]}, calls: {name: calls per
    inventory}, figures: walk figures (from the Walker handed to ``walk_last_error``),
    sizes}."""
    m = _agent_module()
    a = m._agent
    clock = time.perf_counter
    main = threading.main_thread()
    current = {}
    calls = {}
    figures = {}

    def shadow(name, fn):
        def timed(*args, **kwargs):
            if threading.current_thread() is not main:
                return fn(*args, **kwargs)
            started = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                current[name] = current.get(name, 0.0) + _ms(clock() - started)
                calls[name] = calls.get(name, 0) + 1
                for arg in args:
                    if hasattr(arg, "visits") and hasattr(arg, "truncated"):
                        figures["walk_visits"] = arg.visits
                        figures["walk_truncated"] = bool(arg.truncated)

        return timed

    restore = []  # (owner, attribute, original)
    for module_name, attr in SECTION_TARGETS:
        found = _owner(m, module_name, attr)
        if found is None:
            continue
        owner, name = found
        original = vars(owner)[name]
        restore.append((owner, name, original))
        setattr(owner, name, shadow(f"{module_name}.{attr}", original))

    gc_started = []

    def on_gc(phase, info):
        if phase == "start":
            gc_started.append(clock())
        elif gc_started:
            key = f"gc collections, generation {info['generation']}"
            current[key] = current.get(key, 0.0) + _ms(clock() - gc_started.pop())
            calls[key] = calls.get(key, 0) + 1

    times = {}
    gc.callbacks.append(on_gc)
    try:
        for _ in range(reps):
            current.clear()
            started = clock()
            inventory = a.build_inventory(None)
            current["build_inventory (full)"] = _ms(clock() - started)
            a.broadcast(inventory)
            for name, value in current.items():
                times.setdefault(name, []).append(value)
            figures["inventory_json_bytes"] = len(json.dumps(inventory))
            figures["truncated"] = bool(inventory.get("truncated"))
            del inventory
    finally:
        gc.callbacks.remove(on_gc)
        for owner, attr, original in reversed(restore):
            setattr(owner, attr, original)
    figures.update(
        tracked_modules=len(a.tracker.live()),
        sys_modules=len(sys.modules),
        user_ns=len(a.shell.user_ns),
    )
    return {
        "times": times,
        "calls": {name: count / reps for name, count in calls.items()},
        "figures": figures,
    }


# ---- where the hook's time goes in real cells


_hook_profile = {}  # "prof": the cProfile.Profile of profile_hook


def profile_hook(event="post_run_cell", profile=True):
    """Put a cProfile (``profile``) around the agent's ``event`` callback (the timed wrapper of
    ``wrap_hooks`` when there is one, so its times include the profiler) until
    ``profile_hook_stop``: the profile of the hook in the real cells that run meanwhile. Garbage
    collections inside the hook are timed through ``gc.callbacks`` either way."""
    prof = _hook_profile.setdefault("prof", cProfile.Profile() if profile else None)
    a = agent()
    clock = time.perf_counter
    inside = []
    gc_times = _hook_profile.setdefault("gc", {})  # generation -> [ms]
    gc_started = []

    def on_gc(phase, info):
        if not inside:
            return
        if phase == "start":
            gc_started.append(clock())
        elif gc_started:
            gc_times.setdefault(info["generation"], []).append(_ms(clock() - gc_started.pop()))

    gc.callbacks.append(on_gc)
    _hook_profile["on_gc"] = on_gc
    callbacks = _shell().events.callbacks[event]
    for i, fn in enumerate(callbacks):
        inner = getattr(fn, "__wrapped__", fn)
        if getattr(inner, "__self__", None) is a:

            def profiled(*args, _fn=fn, **kwargs):
                inside.append(True)
                if prof is not None:
                    prof.enable()
                try:
                    return _fn(*args, **kwargs)
                finally:
                    if prof is not None:
                        prof.disable()
                    inside.pop()

            profiled.__wrapped__ = fn
            callbacks[i] = profiled
            _hook_profile["restore"] = (callbacks, i, fn)
            return True
    return False


def profile_hook_stop(calls, top=400):
    """Undo ``profile_hook``; the profile's text (by tottime, then cumulative; ms are per call
    of the hook, ``calls`` calls)."""
    callbacks, i, fn = _hook_profile.pop("restore")
    callbacks[i] = fn
    gc.callbacks.remove(_hook_profile.pop("on_gc"))
    text = io.StringIO()
    for generation, times in sorted(_hook_profile.pop("gc").items()):
        text.write(
            f"gc generation {generation}: {len(times) / calls:.2f} per hook, "
            f"{sum(times) / calls:.3f} ms per hook, max {max(times):.3f} ms\n"
        )
    prof = _hook_profile.pop("prof")
    if prof is None:
        return text.getvalue()
    rows = []
    stats = pstats.Stats(prof)
    for (filename, line, name), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():
        where = os.path.basename(filename) if filename.startswith("/") else filename
        rows.append(
            (f"{where}:{line}({name})", ncalls / calls, _ms(tottime) / calls, _ms(cumtime) / calls)
        )
    text.write(f"{'function':<70} {'calls':>9} {'tot ms':>8} {'cum ms':>8}\n")
    for key in (2, 3):
        rows.sort(key=lambda r, k=key: r[k], reverse=True)
        for where, ncalls, tottime, cumtime in rows[:top]:
            text.write(f"{where[-70:]:<70} {ncalls:>9.1f} {tottime:>8.3f} {cumtime:>8.3f}\n")
        text.write("\n")
    return text.getvalue()


def _live_sections():
    """A generator: ``sections``'s shadowed functions and garbage-collection timer, in the
    calling thread's CPU time (less noise from other processes than the wall clock), installed
    until it is closed; it yields ({name: ms} of the current hook, {name: [ms per hook]})."""
    m = _agent_module()
    clock = time.thread_time  # CPU time of the calling thread: less noise from others
    main = threading.main_thread()
    current = {}
    calls = {}
    figures = {}

    def shadow(name, fn):
        def timed(*args, **kwargs):
            if threading.current_thread() is not main:
                return fn(*args, **kwargs)
            started = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                current[name] = current.get(name, 0.0) + _ms(clock() - started)
                calls[name] = calls.get(name, 0) + 1
                for arg in args:
                    if hasattr(arg, "visits") and hasattr(arg, "truncated"):
                        figures["walk_visits"] = arg.visits
                        figures["walk_truncated"] = bool(arg.truncated)

        return timed

    restore = []  # (owner, attribute, original)
    for module_name, attr in SECTION_TARGETS:
        found = _owner(m, module_name, attr)
        if found is None:
            continue
        owner, name = found
        original = vars(owner)[name]
        restore.append((owner, name, original))
        setattr(owner, name, shadow(f"{module_name}.{attr}", original))

    gc_started = []

    def on_gc(phase, info):
        if phase == "start":
            gc_started.append(clock())
        elif gc_started:
            key = f"gc collections, generation {info['generation']}"
            current[key] = current.get(key, 0.0) + _ms(clock() - gc_started.pop())
            calls[key] = calls.get(key, 0) + 1

    times = {}
    gc.callbacks.append(on_gc)
    try:
        yield current, times
    finally:
        gc.callbacks.remove(on_gc)
        for owner, attr, original in reversed(restore):
            setattr(owner, attr, original)


_live = {}


def live_sections_start(event="post_run_cell"):
    """``sections`` around the agent's ``event`` callback in the real cells that run until
    ``live_sections_stop``: the same shadowed functions, timed per call of the hook."""
    gen = _live_sections()
    current, times = next(gen)
    a = agent()
    callbacks = _shell().events.callbacks[event]
    clock = time.perf_counter
    for i, fn in enumerate(callbacks):
        inner = getattr(fn, "__wrapped__", fn)
        if getattr(inner, "__self__", None) is a:

            def timed(*args, _fn=fn, **kwargs):
                current.clear()
                started = clock()
                cpu_started = time.thread_time()
                try:
                    return _fn(*args, **kwargs)
                finally:
                    current["hook cpu"] = _ms(time.thread_time() - cpu_started)
                    current["hook"] = _ms(clock() - started)
                    for name, value in current.items():
                        times.setdefault(name, []).append(value)

            callbacks[i] = timed
            _live.update(gen=gen, restore=(callbacks, i, fn), times=times)
            return True
    gen.close()
    return False


def live_sections_stop():
    """Undo ``live_sections_start``: {name: [ms per hook]}."""
    callbacks, i, fn = _live.pop("restore")
    callbacks[i] = fn
    _live.pop("gen").close()
    return _live.pop("times")
