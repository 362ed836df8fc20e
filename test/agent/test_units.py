"""In-process checks of the agent's pure parts and of the clean-cell template (no kernel)."""

import ast
import collections
import functools
import re
import sys

import pytest
from conftest import AGENT_DIR, LOADER_PATH, MODULES, agent_modules, load_agent

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def agent():
    """The agent package, loaded as the loader registers it (under a private name)."""
    return load_agent()


def test_agent_is_stdlib_only_ascii_and_versioned(agent):
    assert LOADER_PATH.read_text(encoding="utf-8").isascii()
    # every module of the package is in the payload, each once
    names = [name for name, _text in agent_modules()]
    assert sorted(names) == sorted(p.stem for p in AGENT_DIR.glob("*.py"))
    assert len(set(names)) == len(names) and names[-1] == "__init__"
    for index, (name, text) in enumerate(agent_modules()):
        assert text.isascii(), name
        top_level = set()
        # kernels run Python 3.8 and later: no newer syntax
        for node in ast.parse(text, feature_version=(3, 8)).body:
            if isinstance(node, ast.Import):
                top_level.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                top_level.add(node.module.split(".")[0])
            elif isinstance(node, ast.ImportFrom):
                # within the package: only modules loaded before this one (MODULES order)
                assert node.level == 1, name
                wanted = [node.module] if node.module else [a.name for a in node.names]
                assert all(w in MODULES[:index] for w in wanted), (name, wanted)
        assert top_level <= set(sys.stdlib_module_names), (name, top_level)
    assert re.fullmatch(r"\d+\.\d+\.\d+", agent.AGENT_VERSION)
    assert agent.limits.COMM_TARGET == "jupyterlab_gpu_hygiene.v1"


UUIDS = ["GPU-aaaa-1111", "GPU-bbbb-2222", "GPU-cccc-3333", None]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (None, [0, 1, 2, 3]),
        ("", []),
        ("2,0", [2, 0]),
        (" 1 , 3 ", [1, 3]),
        ("1,7,0", [1]),  # CUDA stops at the first invalid entry
        ("-1", []),
        ("0,0", [0]),
        ("GPU-bbbb-2222,GPU-aaaa", [1, 0]),  # a unique prefix is enough
        ("cccc", [2]),  # "GPU-" may be left out
        ("GPU-", []),  # ambiguous prefix
        ("MIG-aaaa", []),  # no MIG instance listed (see test_gpu_processes.py)
    ],
)
def test_cuda_visible_devices_mapping(agent, env, expected):
    assert agent.visible.cuda_visible_nvml_indices(env, UUIDS) == expected


def test_model_stats_counts_shared_storages_once_and_includes_gradients(agent):
    torch = pytest.importorskip("torch")

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(100, 16)
            self.head = torch.nn.Linear(16, 100, bias=False)
            self.head.weight = self.embed.weight  # tied: one storage
            self.register_buffer("scale", torch.ones(8, dtype=torch.float64))
            self.view = torch.nn.Linear(4, 4, bias=False)
            self.view.weight = torch.nn.Parameter(self.embed.weight.data[:4, :4])  # a view

    model = Tied()
    count, storages, has_tensors = agent.models.model_stats(model)
    assert has_tensors
    assert count == 100 * 16 + 16  # unique parameters: embed/head weight once, plus view
    assert agent.storage.bytes_by_device(storages) == {"cpu": 100 * 16 * 4 + 8 * 8}
    model.embed.weight.grad = torch.zeros_like(model.embed.weight)
    _, storages, _ = agent.models.model_stats(model)
    assert agent.storage.bytes_by_device(storages) == {"cpu": 2 * 100 * 16 * 4 + 8 * 8}
    with torch.device("meta"):
        meta = torch.nn.Linear(1000, 1000)
    count, storages, has_tensors = agent.models.model_stats(meta)
    assert (count, storages, has_tensors) == (1000 * 1000 + 1000, {}, True)
    assert agent.models.model_stats(torch.nn.ReLU())[2] is False


def test_module_forest_and_labels(agent):
    torch = pytest.importorskip("torch")
    inner = torch.nn.Linear(2, 2)
    outer = torch.nn.Sequential(torch.nn.Sequential(inner))
    lone = torch.nn.Conv2d(1, 1, 1)
    live = [(inner, 0), (outer, 1), (lone, 2)]
    tops, parent = agent.models.module_forest(live)
    assert [m for m, _ in tops] == [outer, lone]
    assert parent[id(inner)] is outer[0] and parent[id(outer[0])] is outer
    assert agent.models.model_family("ultralytics.engine.model") == "ultralytics"
    assert agent.models.model_family("transformers.models.bert") == "transformers"
    assert agent.models.model_family("torchvision.models.resnet") == "torch"
    assert agent.models.model_label(lone, "Conv2d", "torch") == "Conv2d"
    wrapper = torch.nn.Module()
    wrapper.cfg = "/models/yolov8s.yaml"
    assert agent.models.model_label(wrapper, "YOLO", "ultralytics") == "YOLO (yolov8s.yaml)"
    wrapper.cfg, wrapper.ckpt_path = None, "runs/weights/best.pt"
    assert agent.models.model_label(wrapper, "YOLO", "ultralytics") == "YOLO (best.pt)"


def test_oom_messages_of_both_torch_wordings_are_parsed(agent):
    mib, gib = 2**20, 2**30
    new = (
        "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.19 GiB"
        " of which 3.19 MiB is free. Including non-PyTorch memory, this process has 79.18 GiB"
        " memory in use."
    )
    assert agent.oom.parse_oom_message(new) == {
        "requested": 20 * mib,
        "gpu": 0,
        "total": int(79.19 * gib),
        "free": int(3.19 * mib),
    }
    old = (
        "CUDA out of memory. Tried to allocate 512.00 KiB (GPU 3; 10.76 GiB total capacity;"
        " 9.84 GiB already allocated; 17.56 MiB free; 9.90 GiB reserved in total by PyTorch)"
    )
    assert agent.oom.parse_oom_message(old) == {
        "requested": 512 * 1024,
        "gpu": 3,
        "total": int(10.76 * gib),
        "free": int(17.56 * mib),
    }
    # no figures (the old RuntimeError "CUDA error: out of memory"), and not a str at all
    empty = {"requested": None, "gpu": None, "total": None, "free": None}
    assert agent.oom.parse_oom_message("CUDA error: out of memory") == empty
    assert agent.oom.parse_oom_message(None) == empty
    assert agent.oom.parse_oom_message("Tried to allocate 1.5 GB")["requested"] == int(1.5 * gib)


def test_only_cuda_out_of_memory_errors_count(agent):
    class OutOfMemoryError(RuntimeError):  # torch.OutOfMemoryError's name, torch not needed
        pass

    class Sub(OutOfMemoryError):
        pass

    assert agent.oom.is_cuda_oom(OutOfMemoryError("anything"))
    assert agent.oom.is_cuda_oom(Sub("anything"))
    assert agent.oom.is_cuda_oom(RuntimeError("CUDA error: out of memory"))
    assert not agent.oom.is_cuda_oom(MemoryError("out of memory"))
    assert not agent.oom.is_cuda_oom(RuntimeError("MPS backend out of memory"))
    assert not agent.oom.is_cuda_oom("CUDA out of memory")


def test_edge_labels_name_each_hop_without_running_user_code(agent):
    class Box:
        def __getattribute__(self, name):
            raise AssertionError("user code ran")

    child = object()
    box = Box()
    attrs = object.__getattribute__(box, "__dict__")
    attrs["net"] = child
    assert agent.paths.edge_label(attrs, child, box) == ".net"
    assert agent.paths.edge_label(box, attrs, None) == ""
    assert agent.paths.edge_label({"a b": child}, child, None) == "['a b']"
    assert agent.paths.edge_label({3: child}, child, None) == "[3]"
    assert agent.paths.edge_label({child: 1}, child, None) == "<key>"
    assert agent.paths.edge_label([None, child], child, None) == "[1]"
    assert agent.paths.edge_label((child,), child, None) == "[0]"
    assert agent.paths.edge_label({child}, child, None) == "{\u2026}"
    # no name for the reference: the type of what holds it, never a bare "<ref>"
    assert agent.paths.edge_label(object(), child, None) == "<in object>"
    assert agent.paths.edge_label(collections.deque([None, child]), child, None) == "[1]"
    partial = functools.partial(print, child)
    assert agent.paths.edge_label(partial, partial.args, None) == ".args"

    class Private:
        __slots__ = ("__held", "shown")

    private = Private()
    object.__setattr__(private, "_Private__held", child)
    assert agent.paths.edge_label(private, child, None) == "._Private__held"
    # a dict subclass is searched too, through dict's own method, never its overrides
    # (an optimizer's state: a defaultdict keyed by parameter)

    class Hostile(dict):
        def items(self):
            raise AssertionError("the agent ran user code")

        def __iter__(self):
            raise AssertionError("the agent ran user code")

    state = collections.defaultdict(dict)
    key = object()
    state[key] = child
    assert agent.paths.edge_label(state, child, None) == "[<object>]"
    assert agent.paths.edge_label(Hostile(w=child), child, None) == "['w']"


def test_a_finished_frame_names_its_locals(agent):
    def step(batch):
        activation = [batch]
        raise ValueError(activation)

    try:
        step(1)
    except ValueError as exc:
        frame = exc.__traceback__.tb_next.tb_frame
        activation = exc.args[0]
    assert agent.paths.frame_local_label(frame, activation) == ".activation"
    assert agent.paths.frame_local_label(frame, object()) == "<local>"


def test_a_frame_whose_locals_were_read_still_names_them(agent):
    # IPython's traceback rendering (and debuggers) read frame.f_locals; before Python 3.13 that
    # leaves a snapshot dict among the frame's referents, which must neither shift the positional
    # match (the H200 run on 3.12 read "<local>") nor give a wrong name when a local is unbound.
    def step(batch):
        activation = [batch]
        names = {"batch": 0, "activation": 1}  # a dict local keyed by local names is not it
        if batch > 1:
            total = 2  # unbound when the error is raised
            return total
        raise ValueError(activation, names)

    try:
        step(1)
    except ValueError as exc:
        frame = exc.__traceback__.tb_next.tb_frame
        activation, names = exc.args
    frame.f_locals  # noqa: B018 -- what IPython's traceback rendering does
    assert agent.paths.frame_local_label(frame, activation) == ".activation"
    assert agent.paths.frame_local_label(frame, names) == ".names"
    assert agent.paths.frame_local_label(frame, object()) == "<local>"
