"""The in-cell leak trend's facts (issue 15), in this process without a kernel: each sample's
``allocatedMin`` (the lowest of the sampler's reads between samples) and ``limit`` (the caching
allocator's cap). Without a GPU, torch's CUDA figures come from a small fake ``torch`` module put
in ``sys.modules`` (the agent only ever takes torch from there); the real CPU torch checks that
nothing is read and no CUDA state is created before CUDA is used."""

import random
import sys
import threading
import time
import types

import pytest
from conftest import load_agent

pytestmark = pytest.mark.timeout(60)

GiB = 2**30


@pytest.fixture(scope="module")
def agent():
    return load_agent()


class FakeCuda:
    """``torch.cuda`` as the agent calls it: devices whose allocated bytes the test sets."""

    def __init__(self, totals, fraction=1.0, nested=True, has_fraction=True):
        self.totals = list(totals)
        self.allocated = [0] * len(totals)
        self.reserved = [0] * len(totals)
        self.fraction = fraction
        self.calls = []  # (function, device) in call order
        if nested:
            self.memory_stats_as_nested_dict = self._nested
        if has_fraction:
            self.get_per_process_memory_fraction = self._fraction

    def is_initialized(self):
        return True

    def device_count(self):
        return len(self.totals)

    def memory_allocated(self, index):
        self.calls.append(("memory_allocated", index))
        return self.allocated[index]

    def memory_reserved(self, index):
        return self.reserved[index]

    def _nested(self, index):
        self.calls.append(("nested", index))
        return {
            "allocated_bytes": {"all": {"current": self.allocated[index]}},
            "reserved_bytes": {"all": {"current": self.reserved[index]}},
        }

    def _fraction(self, index):
        if isinstance(self.fraction, Exception):
            raise self.fraction
        return self.fraction

    def get_device_properties(self, index):
        self.calls.append(("properties", index))
        return types.SimpleNamespace(total_memory=self.totals[index])


@pytest.fixture
def fake_torch(monkeypatch):
    """Install a fake ``torch`` (returns a function that builds its ``cuda``)."""

    def install(*args, **kwargs):
        torch = types.ModuleType("torch")
        torch.cuda = FakeCuda(*args, **kwargs)
        monkeypatch.setitem(sys.modules, "torch", torch)
        return torch.cuda

    return install


def test_limit_is_the_fraction_of_the_total_torch_knows(agent, fake_torch):
    devices = agent.devices
    cuda = fake_torch([80 * GiB], fraction=0.5)
    totals = {}
    assert devices.allocator_limit(sys.modules["torch"], 0, totals) == 40 * GiB
    assert devices.allocator_limit(sys.modules["torch"], 0, totals) == 40 * GiB
    # the total is asked once, then kept
    assert cuda.calls.count(("properties", 0)) == 1
    cuda.fraction = 1.0  # no cap
    assert devices.allocator_limit(sys.modules["torch"], 0, totals) is None
    cuda.fraction = RuntimeError("CUDA error")
    assert devices.allocator_limit(sys.modules["torch"], 0, totals) is None


def test_no_limit_from_a_torch_without_the_fraction_getter(agent, fake_torch):
    fake_torch([80 * GiB], has_fraction=False)
    assert agent.devices.allocator_limit(sys.modules["torch"], 0) is None


def test_allocated_now_reads_the_nested_dict_else_memory_allocated(agent, fake_torch):
    cuda = fake_torch([80 * GiB])
    cuda.allocated[0] = 123
    assert agent.devices.allocated_now(sys.modules["torch"], 0) == 123
    assert cuda.calls == [("nested", 0)]
    cuda = fake_torch([80 * GiB], nested=False)
    cuda.allocated[0] = 456
    assert agent.devices.allocated_now(sys.modules["torch"], 0) == 456
    assert cuda.calls == [("memory_allocated", 0)]


def test_allocated_and_reserved_come_from_one_nested_dict_else_both_getters(agent, fake_torch):
    cuda = fake_torch([80 * GiB, 80 * GiB])
    cuda.allocated[:] = [5, 7]
    cuda.reserved[:] = [8, 9]
    torch = sys.modules["torch"]
    assert agent.devices.allocated_reserved(torch, 1) == (7, 9)
    memory = agent.devices.torch_memory()
    assert {k: tuple(v) for k, v in memory.items()} == {"cuda:0": (5, 8), "cuda:1": (7, 9)}
    assert cuda.calls == [("nested", 1), ("nested", 0), ("nested", 1)]
    cuda = fake_torch([80 * GiB], nested=False)
    cuda.allocated[0], cuda.reserved[0] = 3, 4
    assert agent.devices.allocated_reserved(sys.modules["torch"], 0) == (3, 4)
    assert cuda.calls == [("memory_allocated", 0)]


def test_samples_report_the_lowest_read_since_the_previous_sample_and_the_cap(agent, fake_torch):
    cuda = fake_torch([80 * GiB, 80 * GiB], fraction=0.25)
    sampler = agent.devices.DeviceSampler()  # no NVML: torch's figures only
    cuda.allocated[:] = [6 * GiB, 0]
    cuda.reserved[:] = [8 * GiB, 0]
    first = sampler.sample()
    # no reads yet: the sample's own value; the cap only where torch holds memory
    assert [(e["allocated"], e["allocatedMin"], e["limit"]) for e in first] == [
        (6 * GiB, 6 * GiB, 20 * GiB),
        (0, 0, None),
    ]
    assert sampler.reads_wanted()  # torch holds memory on cuda:0
    cuda.calls.clear()
    for value in (5 * GiB, 3 * GiB, 7 * GiB):  # a training step's sawtooth between samples
        cuda.allocated[0] = value
        sampler.read_low()
    # only the device where torch reserved memory is read
    assert cuda.calls == [("nested", 0)] * 3
    cuda.allocated[0] = 6 * GiB
    second = sampler.sample()[0]
    assert (second["allocated"], second["allocatedMin"]) == (6 * GiB, 3 * GiB)
    third = sampler.sample()[0]  # the reads were used up by the previous sample
    assert third["allocatedMin"] == 6 * GiB
    # the sample's own value counts too: lower than every read since
    sampler.read_low()
    cuda.allocated[0] = 2 * GiB
    assert sampler.sample()[0]["allocatedMin"] == 2 * GiB


def test_real_torch_before_cuda_is_used_reads_nothing_and_stays_uninitialised(agent):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_initialized():
        pytest.skip("CUDA already initialised in this process")
    sampler = agent.devices.DeviceSampler()
    sampler.read_low()
    entries = sampler.sample()
    assert not sampler.reads_wanted()  # nothing to read: the sampler is not woken for reads
    # without NVML and CUDA no device entry; with NVML (a GPU machine) no torch figure
    for entry in entries:
        assert entry["allocated"] is None and entry["allocatedMin"] is None
        assert entry["limit"] is None
    assert not torch.cuda.is_initialized()


def test_the_sampler_thread_reads_between_ticks_only_while_asked(agent):
    """Reads every ~read_ms while ``reading()`` is true, none otherwise; the waits are drawn
    from the thread's own generator (the user's ``random`` sequence is not touched)."""
    reads, ticks = [], []
    wanted = threading.Event()

    class Owner:
        pass

    thread = agent.sampler.SamplerThread(
        Owner(),
        lambda: ticks.append(time.monotonic()),
        None,
        lambda: reads.append(time.monotonic()),
        wanted.is_set,
    )
    thread.interval_ms = 300
    thread.read_ms = 10
    random.seed(1234)
    state = random.getstate()
    thread.ensure()
    try:
        time.sleep(0.4)
        assert reads == []  # not reading: ticks only
        wanted.set()
        thread.wake()
        time.sleep(0.6)
        wanted.clear()
        time.sleep(0.05)
        count = len(reads)
        time.sleep(0.4)
    finally:
        thread.stop()
    assert len(reads) == count  # stopped reading
    # ~10 ms apart (5-15 ms waits) over 0.6 s; loose bounds for a busy test machine
    assert 10 <= count <= 130, count
    assert len(ticks) >= 3
    assert random.getstate() == state
