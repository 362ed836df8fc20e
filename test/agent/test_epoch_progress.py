"""``sample.progress`` (issue 15, item 2): the running Ultralytics trainer's epoch, read by the
sampler thread while a cell trains.

In process, with fakes (``progress.ProgressReader``): classes that only look like Ultralytics'
by their ``__module__`` and ``__qualname__`` (a hostile metaclass, ``__getattribute__``,
``__getattr__`` and properties that record and raise when touched: the reader runs none of
them), a training thread that stops at each step of ``BaseTrainer._do_train``'s epoch loop, and
the reader's cost per call.

In a real kernel on the CPU: a real ``model.train()`` of ``YOLO('yolov8n.yaml')`` on a tiny
synthetic dataset, sampled every 250 ms: the training cell's samples carry epochs 0, 1, 2 in
order with ``epochs`` 3, the setup and what the cell does after the training none; idle
samples and a busy cell that does not train none; a wrapper created in the training cell
itself is read too (through the tracker); the cell's namespace and outputs are the user's.
"""

import sys
import threading
import time
import timeit
import types
import weakref

import pytest
from checks import WITHOUT_POLARS, make_dataset
from conftest import kernel_version, load_agent

# compat: version-sensitive, in the subset `make test-compat-oldest` runs (scripts/compat.py)
pytestmark = [pytest.mark.timeout(400), pytest.mark.compat]

INTERVAL_MS = 250  # the agent's shortest sample interval


@pytest.fixture(scope="module")
def progress():
    """The agent's ``progress`` module, loaded as the loader registers it."""
    return load_agent("_gpu_hygiene_agent_progress_test").progress


# --------------------------------------------------------------------------------------------
# fakes: Ultralytics' class names, hostile everywhere else


TOUCHED = []  # what the reader touched of the fakes' hooks
ARMED = []  # non-empty: the hooks record and raise


def _hostile(what):
    if ARMED:
        TOUCHED.append(what)
        raise AssertionError(f"user code ran: {what}")


class Meta(type):
    """A metaclass whose attribute lookup records and raises (``type(x).__mro__`` etc.)."""

    def __getattribute__(cls, name):
        _hostile(("class attribute", name))
        return super().__getattribute__(name)


def _trap(name):
    return property(lambda self: _hostile(("property", name)))


def _getattribute(self, name):
    _hostile(("__getattribute__", name))
    return object.__getattribute__(self, name)


def _getattr(self, name):
    _hostile(("__getattr__", name))
    raise AttributeError(name)


def _eq(self, other):
    _hostile(("__eq__",))
    return self is other


HOSTILE = {
    "__getattribute__": _getattribute,
    "__getattr__": _getattr,
    "__eq__": _eq,
    "__hash__": lambda self: (_hostile(("__hash__",)), id(self))[1],
}


def fake_class(name, bases, module, qualname=None, **members):
    return Meta(
        name,
        bases,
        {"__module__": module, "__qualname__": qualname or name, **HOSTILE, **members},
    )


def dict_of(obj):
    """The instance dict of a fake, through its class's ``__dict__`` slot (no hook runs)."""
    for c in type.__dict__["__mro__"].__get__(type(obj)):
        slot = type.__dict__["__dict__"].__get__(c).get("__dict__")
        if isinstance(slot, types.GetSetDescriptorType):
            return slot.__get__(obj)
    raise TypeError("no instance dict")


def _do_train(self):
    """The fake epoch loop, shaped like Ultralytics 8.x ``BaseTrainer._do_train``: ``stop``
    at setup, ``train_time_start`` when the loop starts, ``epoch`` at the top of each epoch,
    ``stop`` after the last; it waits at each step (``steps``) for the test to read."""
    d = dict_of(self)
    steps = d["steps"]
    d["stop"] = False  # _setup_train
    steps.pause("setup")
    d["epoch_time_start"] = d["train_time_start"] = time.time()
    steps.pause("started")
    for epoch in range(d["epochs"]):
        d["epoch"] = epoch
        deep(60, steps.pause, f"epoch {epoch}")  # inside a forward pass: a deeper stack
    d["stop"] = True
    steps.pause("final validation")


def deep(n, fn, *args):
    return deep(n - 1, fn, *args) if n else fn(*args)


Model = fake_class("Model", (), "ultralytics.engine.model", trainer=_trap("trainer"))
YOLO = fake_class("YOLO", (Model,), "ultralytics.models.yolo.model")
TRAPS = {k: _trap(k) for k in ("epoch", "epochs", "stop", "train_time_start")}
BaseTrainer = fake_class(
    "BaseTrainer", (), "ultralytics.engine.trainer", _do_train=_do_train, **TRAPS
)
DetectionTrainer = fake_class("DetectionTrainer", (BaseTrainer,), "ultralytics.models.yolo.detect")
# a user's subclass that replaced the instance dict by a property: never read
Odd = fake_class("Odd", (DetectionTrainer,), "__main__", __dict__=_trap("__dict__"))
# a class of the same name elsewhere: not Ultralytics'
NotUltralytics = fake_class("BaseTrainer", (), "mylib.engine.trainer", _do_train=_do_train, **TRAPS)


def new(cls, **attrs):
    obj = object.__new__(cls)
    dict_of(obj).update(attrs)
    return obj


class Steps:
    """The training thread stops at each ``pause(name)`` until the test read (``take``)."""

    def __init__(self):
        self.ready = threading.Event()
        self.go = threading.Event()
        self.name = None

    def pause(self, name):
        self.name = name
        self.ready.set()
        assert self.go.wait(10)
        self.go.clear()

    def take(self):
        assert self.ready.wait(10), "the training thread stopped"
        self.ready.clear()
        return self.name

    def resume(self):
        self.go.set()


def train(wrapper, trainer, steps):
    """``Model.train``: the wrapper's ``trainer`` is set before ``trainer.train()`` runs."""
    steps.pause("trainer built")
    dict_of(wrapper)["trainer"] = trainer
    steps.pause("before the loop")
    _do_train(trainer)
    steps.pause("after the training")


def run_training(reader, wrapper, trainer, steps, since=None):
    """Run ``train`` in a thread (the cell), the reader reading at each of its steps from this
    one (the sampler), the fakes' hooks armed; returns [(step, what was read)]."""
    thread = threading.Thread(target=train, args=(wrapper, trainer, steps), daemon=True)
    since = time.time() if since is None else since
    thread.start()
    reads = []
    ARMED.append(True)
    try:
        while thread.is_alive():
            if not steps.ready.wait(0.05):
                continue
            step = steps.take()
            if not reads:
                reader.cell_started(thread.ident, since)
            reads.append((step, reader.read()))
            steps.resume()
    finally:
        ARMED.clear()
    thread.join(10)
    return reads


EXPECTED_STEPS = [
    ("trainer built", None),
    ("before the loop", None),
    ("setup", None),
    ("started", None),
    ("epoch 0", {"epoch": 0, "epochs": 3}),
    ("epoch 1", {"epoch": 1, "epochs": 3}),
    ("epoch 2", {"epoch": 2, "epochs": 3}),
    ("final validation", None),
    ("after the training", None),
]


def test_the_epoch_in_progress_is_read_without_running_user_code(progress):
    TOUCHED.clear()
    reader = progress.ProgressReader()
    wrapper, steps = new(YOLO, trainer=None), Steps()
    trainer = new(DetectionTrainer, epochs=3, steps=steps)
    ARMED.append(True)  # the traps work: a plain read of any of them records and raises
    with pytest.raises(AssertionError, match="user code ran"):
        wrapper.trainer  # noqa: B018
    with pytest.raises(AssertionError, match="user code ran"):
        type(trainer).__mro__  # noqa: B018
    with pytest.raises(AssertionError, match="user code ran"):
        vars(trainer)
    ARMED.clear()
    assert [t[0] for t in TOUCHED] == ["__getattribute__", "class attribute", "__getattribute__"]
    TOUCHED.clear()
    reader.remember([wrapper, new(Model), new(DetectionTrainer)])
    assert len(reader.wrappers) == 2  # the two wrappers, weakly
    assert run_training(reader, wrapper, trainer, steps) == EXPECTED_STEPS
    assert TOUCHED == []
    ref = weakref.ref(wrapper)
    del wrapper, trainer
    assert ref() is None  # nothing kept it alive
    assert reader.read() is None


@pytest.mark.parametrize(
    "cls, late",
    [
        pytest.param(DetectionTrainer, True, id="its-loop-started-before-the-cell"),
        pytest.param(NotUltralytics, False, id="same-names-another-module"),
        pytest.param(Odd, False, id="a-property-named-__dict__"),
    ],
)
def test_a_trainer_that_is_not_this_cells_ultralytics_one_is_never_read(progress, cls, late):
    TOUCHED.clear()
    reader = progress.ProgressReader()
    wrapper, steps = new(YOLO, trainer=None), Steps()
    reader.remember([wrapper])
    since = time.time() + 3600 if late else None
    reads = run_training(reader, wrapper, new(cls, epochs=3, steps=steps), steps, since)
    assert [step for step, _r in reads] == [step for step, _r in EXPECTED_STEPS]
    assert [r for _step, r in reads] == [None] * len(EXPECTED_STEPS)
    assert TOUCHED == []


def test_of_two_trainings_in_a_cell_the_later_is_read_its_wrapper_found_by_the_tracker(progress):
    package = sys.modules[progress.__name__.rsplit(".", 1)[0]]
    tracker = package.tracker.ModuleTracker()
    tracker.active = True  # as once torch's registration hooks are in place
    reader = progress.ProgressReader(tracker)
    since = time.time() - 1
    # trained to its end earlier in this cell (``stop`` set), same trainer class; one that was
    # interrupted (``stop`` still False) would be read during the second one's setup
    earlier = new(DetectionTrainer, epoch=4, epochs=5, stop=True, train_time_start=since + 0.5)
    done = new(YOLO, trainer=earlier)
    wrapper, steps = new(YOLO, trainer=None), Steps()
    tracker.add(done)
    tracker.add(wrapper)  # both built in the cell: no inventory remembered them
    TOUCHED.clear()
    trainer = new(DetectionTrainer, epochs=3, steps=steps)
    assert run_training(reader, wrapper, trainer, steps, since) == EXPECTED_STEPS
    assert TOUCHED == []
    assert {id(r()) for r in reader.wrappers} == {id(done), id(wrapper)}


def test_reading_costs_microseconds(progress, capsys):
    """The reader's cost per sample on this thread's real stack (pytest's, ~40 frames, plus
    60): a busy cell that does not train (the whole stack walked, nothing else read), and an
    epoch in progress (the stack walked, one wrapper and its trainer read)."""
    reader = progress.ProgressReader()
    wrapper = new(YOLO, trainer=None)
    reader.remember([wrapper])
    figures = {}

    def measure(label):
        reader.cell_started(threading.get_ident(), since)
        n = 2000
        figures[label] = min(timeit.repeat(reader.read, number=n, repeat=5)) / n * 1e6
        return reader.read()

    def _do_train(self):
        d = dict_of(self)
        d["stop"], d["train_time_start"], d["epoch"] = False, time.time(), 1
        return deep(60, measure, "training")

    since = time.time()
    assert deep(60, measure, "busy, not training") is None
    bench = fake_class("DetectionTrainer", (BaseTrainer,), "ultralytics.x", _do_train=_do_train)
    trainer = new(bench, epochs=3)
    dict_of(wrapper)["trainer"] = trainer
    assert _do_train(trainer) == {"epoch": 1, "epochs": 3}
    with capsys.disabled():
        costs = ", ".join(f"{k} {v:.1f} us" for k, v in figures.items())
        print(f"\nprogress reader, per sample: {costs}")
    assert figures["busy, not training"] < 100 and figures["training"] < 200, figures


# --------------------------------------------------------------------------------------------
# a real Ultralytics training in a real kernel (CPU)


PAUSE = "def pause(trainer):  # each epoch lasts over two sample intervals\n    time.sleep(0.6)\n"
PUBLIC_NAMES = "sorted(k for k in dir() if not k.startswith('_'))"


def train_code(wrapper, data, runs, name, epochs):
    return (
        f"{wrapper}.train(data={str(data)!r}, epochs={epochs}, imgsz=64, batch=2, workers=0, "
        f"device='cpu', plots=False, amp=False, save=False, project={str(runs)!r}, "
        f"name={name!r}, exist_ok=True, verbose=False)"
    )


def epochs_of(samples):
    """The (epoch, epochs) of the samples that carry progress, in order."""
    return [(s["progress"]["epoch"], s["progress"]["epochs"]) for s in samples if "progress" in s]


def runs_of(values):
    """``values`` with repeats collapsed: [0, 0, 1, 1, 1, 2] -> [0, 1, 2]."""
    return [v for i, v in enumerate(values) if i == 0 or values[i - 1] != v]


def test_a_real_training_cell_carries_its_epochs(new_kernel, tmp_path, capsys):
    data = make_dataset(tmp_path / "data", n_train=4, n_val=2, size=64)
    runs = tmp_path / "runs"
    kernel = new_kernel(env={"YOLO_OFFLINE": "true", "CUDA_VISIBLE_DEVICES": ""})
    kernel.inject({"sampleIntervalMs": INTERVAL_MS})
    comm = kernel.open_comm(INTERVAL_MS)

    def cell(code):
        """Run a cell; returns (result, the samples from just before it to its inventory)."""
        first = len(comm.messages())
        inventories = len(comm.messages("inventory"))
        result = kernel.run(code, timeout=300)
        assert result.error is None, result.error
        comm.wait_for("inventory", inventories + 1, timeout=60)
        messages = comm.messages()[first:]
        end = [m["type"] for m in messages].index("inventory")
        return result, [m for m in messages[:end] if m["type"] == "sample"]

    def check_idle(samples):
        idle = [s for s in samples if not s["busy"]]
        assert all("progress" not in s for s in idle), idle

    cell("from ultralytics import YOLO\nimport time\n" + WITHOUT_POLARS + PAUSE)
    cell("model = YOLO('yolov8n.yaml')\nmodel.add_callback('on_train_epoch_start', pause)")
    before = kernel.evaluate(n=PUBLIC_NAMES)["n"]

    # the training, then 1 s of the same cell after it
    code = f"results = {train_code('model', data, runs, 'a', 3)}\ntime.sleep(1.0)"
    result, samples = cell(code)
    busy = [s for s in samples if s["busy"]]
    seen = epochs_of(busy)
    assert runs_of(seen) == [(0, 3), (1, 3), (2, 3)], seen
    assert all(len([e for e in seen if e[0] == k]) >= 2 for k in range(3)), seen
    assert "progress" not in busy[0]  # the setup (dataset, model) comes first
    last = max(i for i, s in enumerate(busy) if "progress" in s)
    assert len(busy) - 1 - last >= 2  # the final validation and the second after: none
    check_idle(samples)
    # the user's cell as without the agent: its one name, no output of ours, Ultralytics'
    # own values
    assert sorted(set(kernel.evaluate(n=PUBLIC_NAMES)["n"]) - set(before)) == ["results"]
    assert not any(m["msg_type"] == "error" for m in result.outputs)
    assert "hygiene" not in result.stdout + result.stderr
    # Ultralytics 8.0 ends the loop on the epoch count without setting stop (8.0.239); later
    # ones set it after the last epoch
    stopped = (kernel_version("ultralytics") or (99,)) >= (8, 1)
    assert kernel.evaluate(e="(model.trainer.epoch, model.trainer.epochs, model.trainer.stop)")[
        "e"
    ] == (2, 3, stopped)

    # a busy cell that does not train, the finished trainer still on the model: none
    _result, samples = cell("time.sleep(1.0)")
    assert len([s for s in samples if s["busy"]]) >= 2
    assert epochs_of(samples) == []

    # a wrapper built in the training cell itself (no inventory saw it: the tracker's), and the
    # reader's cost on the kernel's real stack, timed inside the epoch loop (in the callback)
    code = (
        "import sys, timeit\n"
        "reader = sys.modules['_jupyterlab_gpu_hygiene_agent']._agent.progress\n"
        "costs = []\n"
        "def timed(trainer):\n"
        "    costs.append((reader.read(), min(timeit.repeat(reader.read, number=200, "
        "repeat=3)) / 200 * 1e6))\n"
        "    time.sleep(0.6)\n"
        "other = YOLO('yolov8n.yaml')\n"
        "other.add_callback('on_train_epoch_start', timed)\n"
        f"metrics = {train_code('other', data, runs, 'b', 2)}\n"
        "idle_cost = min(timeit.repeat(reader.read, number=1000, repeat=5)) / 1000 * 1e6"
    )
    _result, samples = cell(code)
    seen = epochs_of([s for s in samples if s["busy"]])
    assert runs_of(seen) == [(0, 2), (1, 2)], seen
    check_idle(samples)
    costs, idle = kernel.evaluate(c="costs", i="idle_cost").values()
    assert [read for read, _us in costs] == [{"epoch": 0, "epochs": 2}, {"epoch": 1, "epochs": 2}]
    with capsys.disabled():
        print(
            f"\nprogress reader in the kernel: training {max(us for _r, us in costs):.1f} us, "
            f"a busy cell that does not train {idle:.1f} us per sample"
        )
    assert idle < 200 and all(us < 300 for _read, us in costs), (costs, idle)
