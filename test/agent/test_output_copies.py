"""Issue 17, items 3 and 5, in a real kernel on both devices: tensors in the output cache and
IPython's hidden copies (``_``, ``__``, ``___``, ``_N``, ``Out[N]``, after ``del Out[N]`` and
``%reset -f out``), and user variables holding CUDA tensors outside models (shared storage
shown as shared). The facts (``cells``, ``sole``, ``shared``), then the very cells the browser
generates (``src/analysis/codegen/clean-cell.ts``, ``src/analysis/codegen/tensor-cells.ts``, through
node) run in
the kernel: what they free is checked with weak references and, on CUDA, against torch's
allocated bytes (within 1 MiB).

``[cpu]`` puts the tensors on "cpu" (bytes under "cpu"); the clean plan only drops output-cache
entries that hold CUDA bytes, so there the inventory is relabelled ``cuda:0`` before the
generator sees it. ``[cuda]`` (marked ``gpu``) runs the same expectations on cuda:0.
"""

import json
import re

import pytest
from checks import MiB, within
from conftest import DEVICES
from kernel_driver import clean_cell_shape, comment_text

# compat: version-sensitive, in the subset `make test-compat-oldest` runs (scripts/compat.py)
pytestmark = [pytest.mark.timeout(300), pytest.mark.compat]

on_both = pytest.mark.parametrize("device", DEVICES)

# four tensors of 4 MiB each are made by these cells; ``refs`` keeps weak references to them
SETUP = (
    "import gc, weakref, torch\n"
    "DEV = {dev!r}\n"
    "refs = {{}}\n"
    "def make(key, mib=4):\n"
    "    t = torch.ones(mib * 2**18, device=DEV)\n"
    "    refs[key] = weakref.ref(t)\n"
    "    return t"
)


def start(session):
    s = session(name="outputs")
    s.run(code=SETUP.format(dev=s.dev))
    return s


def roots_of(inventory, kind=None):
    return {r["name"]: r for r in inventory["roots"] if kind is None or r["kind"] == kind}


def on(by_device, dev):
    return (by_device or {}).get(dev, 0)


def as_cuda(inventory, cuda):
    """The inventory the generator sees: on the CPU relabelled as if on cuda:0."""
    if cuda:
        return inventory
    inventory = json.loads(json.dumps(inventory))
    for root in inventory["roots"]:
        for field in ("bytes", "sole", "shared"):
            if root.get(field):
                root[field] = {"cuda:0": sum(root[field].values())}
    return inventory


def alive(s, *keys):
    got = s.evaluate(a=f"[k for k in {list(keys)!r} if refs[k]() is not None]")
    return got["a"]


def allocated(s):
    return s.torch_memory()[0] if s.cuda else None


@on_both
def test_displayed_tensors_map_to_their_cells_and_clean_frees_them(device, session, clean_cells):
    s = start(session)
    s.run(code="make('a')")  # [2]
    s.run(code="[make('b', 2), make('c', 2)]")  # [3] a list of tensors shown
    s.run(code="make('d')")  # [4]
    _, inventory = s.run(code="x = make('x', 8)\nx")  # [5] named and displayed
    roots = roots_of(inventory, "output")
    assert roots["_"]["cells"] == [5] and roots["__"]["cells"] == [4]
    assert roots["___"]["cells"] == [3]
    assert roots["Out[2]"]["cells"] == roots["_2"]["cells"] == [2]
    for name in ("Out[3]", "_3", "___"):
        assert on(roots[name]["sole"], s.dev) == 4 * MiB, name  # the list: both tensors
    # x is named: what its cell shows is shared, never the cell's to free
    for name in ("_", "_5", "Out[5]"):
        assert roots[name]["sole"] == {} and on(roots[name]["shared"], s.dev) == 8 * MiB
        assert roots[name]["sharedWith"] == ["x"]
    x = roots_of(inventory, "variable")["x"]
    assert x["sole"] == {} and on(x["shared"], s.dev) == 8 * MiB

    _, inventory = s.run(code="del Out[2]")  # [6] leaves _2 behind (user_ns and hidden)
    roots = roots_of(inventory, "output")
    assert "Out[2]" not in roots
    assert roots["_2"]["cells"] == [] and on(roots["_2"]["sole"], s.dev) == 4 * MiB
    assert "x" in roots_of(inventory, "variable")

    before = allocated(s)
    clean = clean_cells(as_cuda(inventory, s.cuda), f"outputs-{device}")
    assert 'me="_gpu_hygiene_clear_gpu", out_keys=(3, 4), copies=("_2",)):' in clean
    assert "cells [3], [4], hidden copy _2: 12.0 MiB on cuda:0" in comment_text(clean)
    assert clean_cell_shape(clean) == []  # at most 25 lines, none wider than 79 columns
    s.run(code=clean)
    assert alive(s, "a", "b", "c", "d", "x") == ["x"]
    state = s.evaluate(
        out="sorted(Out)",
        names="sorted(n for n in ('_2', '_3', '_4', '_5') if n in get_ipython().user_ns)",
        hidden="sorted(n for n in ('_2', '_3', '_4') if n in get_ipython().user_ns_hidden)",
        x="x.shape[0]",
    )
    assert state == {"out": [5], "names": ["_5"], "hidden": [], "x": 8 * 2**18}
    if s.cuda:
        assert within(before - allocated(s), 12 * MiB)


@on_both
def test_reset_out_leaves_hidden_copies_that_clean_drops(device, session, clean_cells):
    s = start(session)
    s.run(code="make('a')")
    s.run(code="make('b')")
    s.run(code="make('c')")
    _, inventory = s.run(code="%reset -f out")
    # IPython 9 leaves user_ns_hidden's _, __, ___ behind; 7.34 also its _2, _3, _4 (the
    # clean cell's copies: the slots first, then _N by N)
    left = s.evaluate(
        h="(lambda h: [n for n in ('_', '__', '___') if type(h.get(n)) is not str]"
        " + sorted((n for n in h if __import__('re').fullmatch(r'_\\d+', n)"
        " and type(h[n]) is not str), key=lambda n: int(n[1:])))(get_ipython().user_ns_hidden)",
        d="len({id(v) for n, v in get_ipython().user_ns_hidden.items()"
        " if __import__('re').fullmatch(r'_\\d+|_{1,3}', n) and type(v) is not str})",
    )
    hidden, distinct = left["h"], left["d"]
    roots = roots_of(inventory, "output")
    assert not any(n.startswith("Out[") for n in roots)
    for name in hidden:
        assert roots[name]["cells"] == [] and on(roots[name]["sole"], s.dev) == 4 * MiB
    if not hidden:
        assert alive(s, "a", "b", "c") == []
        return
    before = allocated(s)
    clean = clean_cells(as_cuda(inventory, s.cuda), f"reset-out-{device}")
    copies = ", ".join(f'"{n}"' for n in hidden)
    # (a long tuple is wrapped at 79 columns)
    wanted = f"copies=({copies}{',' if len(hidden) == 1 else ''})"
    assert wanted in re.sub(r"\s+", " ", clean)
    s.run(code=clean)
    assert alive(s, "a", "b", "c") == []
    if s.cuda:
        assert within(before - allocated(s), 4 * MiB * distinct)


@on_both
def test_cuda_tensor_containers_share_storage_and_move_or_delete(device, session, browser_cells):
    def generate(function, *args):
        return browser_cells("tensor-cells", function, *args)

    s = start(session)
    _, inventory = s.run(
        code="results = [make(f'r{i}') for i in range(3)]\n"
        "last = results[-1]\n"
        "acts = {'a': make('a1', 2), 'b': make('a2', 2)}\n"
        "net = torch.nn.Linear(256, 256).to(DEV)\n"
        "params = list(net.parameters())"
    )
    variables = roots_of(inventory, "variable")
    results, last, acts = variables["results"], variables["last"], variables["acts"]
    assert on(results["sole"], s.dev) == 8 * MiB and on(results["shared"], s.dev) == 4 * MiB
    assert results["sharedWith"] == ["last"]
    assert last["sole"] == {} and on(last["shared"], s.dev) == 4 * MiB
    assert on(acts["sole"], s.dev) == 4 * MiB and acts["shared"] == {}
    # a list of a model's parameters keeps no bytes of its own
    params = variables.get("params")
    assert params is None or (params["sole"] == {} and params["bytes"] == {})

    before = allocated(s)
    move = generate("generateMoveToCpuCell", "results", results["sole"])
    s.run(code=move)
    state = s.evaluate(
        devices="[t.device.type for t in results]",
        last="last.device.type",
        gone="[k for k in ('r0', 'r1') if refs[k]() is None]",
    )
    assert state["devices"] == ["cpu"] * 3
    assert state["last"] == ("cuda" if s.cuda else "cpu")
    if s.cuda:
        assert state["gone"] == ["r0", "r1"]  # the CUDA copies are freed; last keeps r2
        assert within(before - allocated(s), 8 * MiB)

    before = allocated(s)
    delete = generate("generateDeleteVariableCell", "acts", acts["sole"])
    _, inventory = s.run(code=delete)
    assert "acts" not in roots_of(inventory, "variable")
    assert s.evaluate(a="'acts' in dir()")["a"] is False
    assert alive(s, "a1", "a2") == []
    if s.cuda:
        assert within(before - allocated(s), 4 * MiB)
