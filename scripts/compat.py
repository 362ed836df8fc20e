#!/usr/bin/env python3
"""The versions the agent meets (issue 16, kernel side): the real-kernel agent suite run in
kernels of other IPython / ipykernel / torch / Ultralytics / transformers versions.

The agent is injected into whatever kernel the user has, so the pytest process stays in
``.venv`` (jupyter_client, pytest) and only the kernel runs elsewhere: one cached virtualenv per
combination (``COMBINATIONS``) under ``.make/compat/<name>/venv`` with the kernel side installed
(ipykernel, IPython, Ultralytics, transformers, numpy pins...), registered as the kernelspec
``gpu-hygiene-compat-<name>`` in ``.make/compat/jupyter/kernels`` (``JUPYTER_PATH`` names
``.make/compat/jupyter`` for the run; the harness starts it where ``GPU_HYGIENE_KERNEL`` names
it: ``test/agent/kernel_driver.py``).

torch 2.14.1 with its CUDA libraries is about 5.5 GB: the combinations marked ``torch:
"shared"`` do not install it. ``.make/compat/layer`` holds symlinks to the installed files of
torch's and torchvision's dependency closure in ``.venv`` (computed with importlib.metadata;
numpy, Pillow and setuptools left out so every venv has its own), and a ``.pth`` file appends
that folder to the venv's ``sys.path``, after its own site-packages: its own packages win. pip
sees torch and torchvision there as installed (so it installs no second copy) and never removes
anything there (a distribution outside the environment is not uninstalled: pip says "Not
uninstalling ... outside environment" and installs its own copy in the venv). The layer comes
from ``.venv`` as ``make setup`` makes it, so a clean clone can build it.

Commands (``make compat`` runs ``all``; ``make test-compat-oldest`` runs ``run oldest``)::

    scripts/compat.py setup NAME...   build (or reuse) the venvs and kernelspecs
    scripts/compat.py run NAME...     setup, then the suite in that kernel; results to
                                      .make/compat/results/NAME.json and docs/compat.json
    scripts/compat.py all             every combination, in order, then ``table``
    scripts/compat.py table           docs/compat.md and README.md's kernel-side section from
                                      docs/compat.json
    scripts/compat.py list            the combinations

``--subset`` runs only the tests marked ``compat`` (version-sensitive behaviour); ``--pytest-args``
adds options. Suites run one after another (the machine has two cores).

Nothing downloads weights or data: the kernels get ``YOLO_OFFLINE`` (Ultralytics >= 8.1 honours
it; 8.0 does not know it, and its settings' ``sync`` off keeps it quiet), ``HF_HUB_OFFLINE`` and
a private ``YOLO_CONFIG_DIR`` per venv (``settings`` written before the first run with
``sync: false``), and the tests build models from YAML / configs.
"""

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPAT = ROOT / ".make" / "compat"
LAYER = COMPAT / "layer"
JUPYTER = COMPAT / "jupyter"
RESULTS = COMPAT / "results"
DOC_JSON = ROOT / "docs" / "compat.json"
DOC_MD = ROOT / "docs" / "compat.md"
README = ROOT / "README.md"
START, END = "<!-- compat:kernel:start -->", "<!-- compat:kernel:end -->"
MAIN_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = os.environ.get("COMPAT_PYTHON", "python3.11")

# the distributions whose versions a result records (those installed in the kernel)
RECORDED = [
    "ipython",
    "ipykernel",
    "jupyter_client",
    "traitlets",
    "comm",
    "torch",
    "torchvision",
    "ultralytics",
    "numpy",
    "transformers",
    "accelerate",
    "lightning",
    "nvidia-ml-py",
]

# not shared from .venv: each venv resolves its own (numpy pins of old Ultralytics)
LAYER_EXCLUDED = {"numpy", "pillow", "setuptools", "pip", "wheel"}

# Each combination: the requirements pip installs into its venv, where torch comes from
# ("shared": the layer of .venv's torch 2.14.1 / torchvision 0.29.1; else the requirement pins
# it), the kernel's own environment (``kernel_env``: Ultralytics before 8.3 loads its
# checkpoints with ``torch.load`` as torch < 2.6 did, and torch >= 2.6 refuses them without
# ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``: a library limit, not the agent's), and what is known to
# degrade (shown in the table). "newest" is .venv itself (the ``python3`` kernel of ``make
# test-agent``): nothing is installed for it.
COMBINATIONS = {
    "oldest": {
        "torch": "shared",
        "requirements": [
            "ipython==7.34.0",
            "ipykernel==6.29.5",
            "ultralytics>=8.0,<8.1",
            "numpy<2",
            "transformers==4.46.3",
            "accelerate==1.1.1",
            "nvidia-ml-py",
        ],
        "about": "IPython 7.34, ipykernel 6.29, Ultralytics 8.0, transformers 4.46, numpy 1.x",
        "kernel_env": {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"},
    },
    "ipython8": {
        "torch": "shared",
        "requirements": [
            "ipython>=8,<9",
            "ipykernel==6.29.5",
            "ultralytics>=8.2,<8.3",
            "transformers>=4.57,<5",
            "accelerate>=1.10,<1.11",
            "nvidia-ml-py",
        ],
        "about": "IPython 8, ipykernel 6.29, Ultralytics 8.2, transformers 4.57",
        "kernel_env": {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"},
    },
    "ipython9": {
        "torch": "shared",
        "requirements": [
            "ipython==9.0.2",
            "ipykernel==7.0.1",
            "ultralytics>=8.3,<8.4",
            "nvidia-ml-py",
        ],
        "about": "IPython 9.0, ipykernel 7.0, Ultralytics 8.3",
    },
    "torch213": {
        "torch": "own",
        "requirements": [
            "torch==2.13.0",
            "ipython>=8,<9",
            "ipykernel>=7,<8",
            "transformers>=4.57,<5",
            "accelerate>=1.10,<1.11",
            "nvidia-ml-py",
        ],
        # tried after the rest; kept only where it imports beside that torch
        "optional": ["torchvision==0.28.0", "ultralytics>=8.4,<8.5"],
        "about": "torch 2.13.0+cpu (the file in /opt/wheels), IPython 8, ipykernel 7",
    },
    "newest": {
        "torch": "main",
        "requirements": [],
        "about": "the main .venv (requirements-dev.txt): what `make test-agent` runs",
    },
}
ORDER = ["oldest", "ipython8", "ipython9", "torch213", "newest"]


def log(*args):
    print("[compat]", *args, file=sys.stderr, flush=True)


def kernel_name(name):
    return "python3" if name == "newest" else f"gpu-hygiene-compat-{name}"


def venv_dir(name):
    return ROOT / ".venv" if name == "newest" else COMPAT / name / "venv"


def venv_python(name):
    return venv_dir(name) / "bin" / "python"


def site_packages(venv):
    found = sorted((venv / "lib").glob("python3*/site-packages"))
    if not found:
        raise SystemExit(f"no site-packages in {venv}")
    return found[0]


def free_gb():
    return shutil.disk_usage(ROOT).free / 2**30


# ------------------------------------------------------------------------------------- layer


def _requirement_name(text):
    return re.split(r"[ <>=!~;\[(]", text.strip(), maxsplit=1)[0]


def _key(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def torch_closure():
    """The distributions of .venv that torch and torchvision need (their ``Requires-Dist``
    followed, with the extras asked for: torch's ``cuda-toolkit[cublas,cufft,...]`` brings the
    CUDA libraries), less ``LAYER_EXCLUDED``; computed by .venv's python (importlib.metadata
    and packaging there). Returns {key: [top-level file or folder names]}."""
    code = r"""
import importlib.metadata as md, json, re
from packaging.requirements import Requirement
def key(n): return re.sub(r"[-_.]+", "-", n).lower()
seen, stack = {}, [("torch", ()), ("torchvision", ())]
while stack:
    n, extras = stack.pop()
    if (key(n), extras) in seen: continue
    try: d = md.distribution(n)
    except md.PackageNotFoundError: seen[(key(n), extras)] = None; continue
    tops = sorted({str(f).split("/")[0] for f in d.files or []} - {"..", "__pycache__"})
    seen[(key(n), extras)] = [t for t in tops if not t.endswith(".pth")]
    for text in d.requires or []:
        r = Requirement(text)
        if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in extras or ("",)):
            stack.append((r.name, tuple(sorted(r.extras))))
print(json.dumps({k: v for (k, _), v in seen.items() if v is not None}))
"""
    done = subprocess.run(
        [str(MAIN_PYTHON), "-c", code], capture_output=True, text=True, check=True
    )
    closure = json.loads(done.stdout)
    return {k: v for k, v in closure.items() if k not in LAYER_EXCLUDED}


def build_layer():
    """``.make/compat/layer``: a symlink per top-level entry of the torch closure's files in
    .venv's site-packages (rebuilt when .venv's torch changes). Returns the folder."""
    source = site_packages(ROOT / ".venv").resolve()
    version = importlib_version(MAIN_PYTHON, ["torch", "torchvision"])
    stamp = LAYER / ".stamp"
    want = json.dumps({"source": str(source), "versions": version}, sort_keys=True)
    if stamp.exists() and stamp.read_text() == want:
        return LAYER
    if "torch" not in version:
        raise SystemExit(".venv has no torch: run `make setup` first")
    shutil.rmtree(LAYER, ignore_errors=True)
    LAYER.mkdir(parents=True)
    entries = sorted({top for tops in torch_closure().values() for top in tops})
    for entry in entries:
        target = source / entry
        if target.exists():
            (LAYER / entry).symlink_to(target)
    stamp.write_text(want)
    log(f"layer: {len(entries)} entries of .venv's torch closure ({version})")
    return LAYER


def importlib_version(python, names):
    """{name: version} of ``names`` installed for ``python`` (absent ones left out)."""
    code = (
        "import importlib.metadata as md, json, sys\n"
        "out = {}\n"
        "for n in sys.argv[1:]:\n"
        "    try: out[n] = md.version(n)\n"
        "    except md.PackageNotFoundError: pass\n"
        "print(json.dumps(out))"
    )
    done = subprocess.run(
        [str(python), "-c", code, *names], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


# --------------------------------------------------------------------------------- the venvs


def _pip(python, *args):
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    cmd = [str(python), "-m", "pip", "install", "-q", *args]
    log(" ".join(cmd[3:]))
    return subprocess.run(cmd, env=env)


def yolo_config(name):
    """The Ultralytics settings folder of a combination's kernels (``YOLO_CONFIG_DIR``), with a
    ``settings.json`` / ``settings.yaml`` that turns ``sync`` (usage events) off before the
    first import, and matplotlib's DejaVuSans as the ``Arial.ttf`` old versions fetch when they
    first draw a label."""
    folder = COMPAT / name / "yolo-config"
    (folder / "Ultralytics").mkdir(parents=True, exist_ok=True)
    return folder


def probe_import(python, modules):
    """None where ``import`` of every module of ``modules`` works in ``python``, else the last
    line of the error (str)."""
    code = "import " + ", ".join(modules)
    done = subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, YOLO_OFFLINE="1", CUDA_VISIBLE_DEVICES=""),
    )
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"exit {done.returncode}"


def setup(name):
    """Build (or reuse, when its stamp matches the requirements) combination ``name``'s venv and
    kernelspec. Returns the setup facts (dict: seconds, reused, notes)."""
    combo = COMBINATIONS[name]
    if name == "newest":
        return {"seconds": 0.0, "reused": True, "notes": []}
    venv = venv_dir(name)
    stamp = COMPAT / name / "stamp.json"
    wanted = hashlib.sha256(
        json.dumps([combo["requirements"], combo.get("optional", []), combo["torch"]]).encode()
    ).hexdigest()
    if stamp.exists():
        facts = json.loads(stamp.read_text())
        if facts.get("hash") == wanted and venv_python(name).exists():
            write_offline_hook(name)
            write_kernelspec(name)
            return {**facts, "reused": True}
    start = time.monotonic()
    shutil.rmtree(COMPAT / name, ignore_errors=True)
    (COMPAT / name).mkdir(parents=True)
    log(f"{name}: new venv ({free_gb():.1f} GB free)")
    subprocess.run([PYTHON, "-m", "venv", str(venv)], check=True)
    python = venv_python(name)
    constraints = COMPAT / name / "constraints.txt"
    pins = []
    if combo["torch"] == "shared":
        layer = build_layer()
        (site_packages(venv) / "_gpu_hygiene_compat_layer.pth").write_text(f"{layer}\n")
        shared = importlib_version(MAIN_PYTHON, ["torch", "torchvision"])
        pins = [f"{k}=={v}" for k, v in shared.items()]
    constraints.write_text("".join(f"{pin}\n" for pin in pins))
    done = _pip(python, "-c", str(constraints), *combo["requirements"])
    if done.returncode != 0:
        raise SystemExit(f"{name}: pip install failed ({done.returncode})")
    notes = []
    if combo["torch"] == "own":  # what comes later keeps the torch installed here
        own = importlib_version(python, ["torch"])
        constraints.write_text("".join(f"{k}=={v}\n" for k, v in own.items()))
    for requirement in combo.get("optional", []):
        if notes:  # an optional package the one before needs (Ultralytics: torchvision)
            notes.append(f"{requirement}: not tried (the one before is missing)")
            continue
        module = {"ultralytics": "ultralytics", "torchvision": "torchvision"}[
            _key(_requirement_name(requirement))
        ]
        # torchvision without its dependencies (they would bring torch's CUDA libraries, several
        # GB, beside the CPU build); what it lacks shows when it is imported
        extra = ["--no-deps"] if module == "torchvision" else []
        if _pip(python, *extra, "-c", str(constraints), requirement).returncode != 0:
            notes.append(f"{requirement}: does not install")
            continue
        error = probe_import(python, [module])
        if error is not None:
            notes.append(f"{requirement}: installs but `import {module}` fails: {error}")
            subprocess.run(
                [str(python), "-m", "pip", "uninstall", "-q", "-y", _requirement_name(requirement)]
            )
    if combo.get("optional"):
        # whatever an optional package pulled in stays; the kernel must still start
        error = probe_import(python, ["ipykernel", "torch"])
        if error is not None:
            raise SystemExit(f"{name}: the kernel side no longer imports: {error}")
    write_offline_hook(name)
    write_kernelspec(name)
    facts = {
        "hash": wanted,
        "seconds": round(time.monotonic() - start, 1),
        "notes": notes,
        "disk_mb": round(du(COMPAT / name) / 2**20),
        "built": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    stamp.write_text(json.dumps(facts, indent=1))
    log(f"{name}: set up in {facts['seconds']} s, {facts['disk_mb']} MB, {free_gb():.1f} GB free")
    return {**facts, "reused": False}


def du(path):
    """Bytes of the files under ``path``, symlinks not followed."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


# A startup hook of the compat venvs (a .pth line, run by site at every start), active only where
# GPU_HYGIENE_COMPAT_OFFLINE=1 (their kernelspecs set it; pip in the same venv is not affected):
# connections and name look-ups beyond the loopback fail as they do offline. Ultralytics 8.0 has no
# offline switch: ``ultralytics.utils.ONLINE = is_online()`` opens TCP connections to 1.1.1.1:53,
# 8.8.8.8:53 and 223.5.5.5:53 on import, and where one succeeds it checks PyPI for an update and
# fetches fonts; YOLO_OFFLINE is honoured from 8.1 on, HF_HUB_OFFLINE by the hub.
OFFLINE_HOOK = """\
import os, socket

if os.environ.get("GPU_HYGIENE_COMPAT_OFFLINE") == "1":
    _LOCAL = ("localhost", "127.", "::1", "0.0.0.0", "")
    def _local(host):
        return not isinstance(host, str) or any(
            host == p or (p.endswith(".") and host.startswith(p)) for p in _LOCAL)
    def _guard(connect):
        def guarded(self, address):
            if self.family in (socket.AF_INET, socket.AF_INET6) and not _local(address[0]):
                raise OSError(101, "Network is unreachable (gpu-hygiene compat kernel: offline)")
            return connect(self, address)
        return guarded
    socket.socket.connect = _guard(socket.socket.connect)
    socket.socket.connect_ex = _guard(socket.socket.connect_ex)
    _getaddrinfo = socket.getaddrinfo
    def _offline_getaddrinfo(host, *args, **kwargs):
        if not _local(host.decode() if isinstance(host, bytes) else host):
            raise socket.gaierror(socket.EAI_NONAME, "offline (gpu-hygiene compat kernel)")
        return _getaddrinfo(host, *args, **kwargs)
    socket.getaddrinfo = _offline_getaddrinfo
"""


def write_offline_hook(name):
    site = site_packages(venv_dir(name))
    (site / "_gpu_hygiene_compat_offline.py").write_text(OFFLINE_HOOK)
    (site / "_gpu_hygiene_compat_offline.pth").write_text("import _gpu_hygiene_compat_offline\n")


def write_kernelspec(name):
    folder = JUPYTER / "kernels" / kernel_name(name)
    folder.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [str(venv_python(name)), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"GPU hygiene compat: {name}",
        "language": "python",
        "env": {
            "YOLO_CONFIG_DIR": str(yolo_config(name)),
            "YOLO_OFFLINE": "true",
            "HF_HUB_OFFLINE": "1",
            "GPU_HYGIENE_COMPAT_OFFLINE": "1",
            **COMBINATIONS[name].get("kernel_env", {}),
        },
    }
    (folder / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n")


# ------------------------------------------------------------------------------------ a run


def run(name, subset=False, pytest_args=()):
    """Setup, then the real-kernel agent suite with ``name``'s kernel; writes its result."""
    facts = setup(name)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"{name}-subset" if subset else name
    junit = RESULTS / f"{stem}.xml"
    env = dict(os.environ)
    env["GPU_HYGIENE_KERNEL"] = kernel_name(name)
    env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(JUPYTER), env.get("JUPYTER_PATH")]))
    env.setdefault("YOLO_OFFLINE", "true")
    env.setdefault("HF_HUB_OFFLINE", "1")
    if name != "newest":
        env["YOLO_CONFIG_DIR"] = str(yolo_config(name))
    cmd = [str(MAIN_PYTHON), "-m", "pytest", "test/agent", "-q", "-p", "no:cacheprovider"]
    cmd += ["--junitxml", str(junit), "-o", "junit_family=xunit1"]
    if subset:
        cmd += ["-m", "compat"]
    cmd += list(pytest_args)
    log(f"{name}: {' '.join(cmd[1:])} (kernel {kernel_name(name)})")
    start = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, env=env)
    seconds = round(time.monotonic() - start, 1)
    result = {
        "name": name,
        "about": COMBINATIONS[name]["about"],
        "kernel": kernel_name(name),
        "torch_source": COMBINATIONS[name]["torch"],
        "requirements": COMBINATIONS[name]["requirements"],
        "versions": importlib_version(venv_python(name), RECORDED),
        "python": subprocess.run(
            [str(venv_python(name)), "-c", "import platform; print(platform.python_version())"],
            capture_output=True,
            text=True,
        ).stdout.strip(),
        "subset": subset,
        "pytest_exit": done.returncode,
        "suite_seconds": seconds,
        "setup_seconds": facts.get("seconds"),
        "setup_notes": facts.get("notes", []),
        "disk_mb": facts.get("disk_mb"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **junit_counts(junit),
    }
    (RESULTS / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    if not subset and not pytest_args:
        merge(result)
    log(
        f"{name}: {result['passed']} passed, {result['failed']} failed, "
        f"{result['skipped']} skipped in {seconds} s"
    )
    return done.returncode


def junit_counts(path):
    """Counts and details of a junit XML file: passed / failed / skipped / xfailed (a known
    version difference, ``conftest.ultralytics_flops_copy``), the failed test ids and their
    first message line, the skip reasons with their counts, the xfailed tests."""
    out = {"passed": 0, "failed": 0, "skipped": 0, "xfailed": 0}
    out.update({"failures": [], "skips": {}, "xfails": []})
    if not path.exists():
        return out
    for case in ET.parse(path).getroot().iter("testcase"):
        test = f"{case.get('file') or case.get('classname')}::{case.get('name')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skip = case.find("skipped")
        if bad is not None:
            out["failed"] += 1
            out["failures"].append(
                {"test": test, "message": (bad.get("message") or "").splitlines()[0][:300]}
            )
        elif skip is not None and skip.get("type") == "pytest.xfail":
            out["xfailed"] += 1
            out["xfails"].append({"test": test, "reason": skip.get("message") or ""})
        elif skip is not None:
            out["skipped"] += 1
            reason = re.sub(r"^Skipped: ", "", skip.get("message") or "")
            out["skips"][reason] = out["skips"].get(reason, 0) + 1
        else:
            out["passed"] += 1
    return out


def merge(result):
    data = json.loads(DOC_JSON.read_text()) if DOC_JSON.exists() else {"combinations": {}}
    data["combinations"][result["name"]] = result
    DOC_JSON.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


# ---------------------------------------------------------------------------------- the table

# What degrades in each combination, written from the failures, xfails and skips seen (the
# table shows it; docs/compat.md has the tests). Agent bugs found here are fixed in the agent;
# these are what the libraries of that combination do differently.
DEGRADES = {
    "oldest": [
        "IPython 7.34 names a cell's code `<cell line: 0>`: shown as `<module>` (normalised)",
        "`%reset -f out` leaves `_N` copies in `user_ns_hidden`: reported, freed by Clean GPU",
        "Ultralytics 8.0: each new YOLO leaves a FLOPs copy of its model waiting for gc (an "
        "unreachable-model finding until the next collection; the model-counting tests xfail)",
        "Ultralytics 8.0 has no offline switch (probes 1.1.1.1:53 at import; the compat kernels "
        "refuse non-loopback connections)",
        "Ultralytics < 8.3 on torch >= 2.6 needs `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1` to train",
        "Ultralytics < 8.3: the DetMetrics of `model.train()` cannot be displayed (xfail)",
        "transformers 4.46: the Trainer's model is named `trainer.model_wrapped`",
        "no Lightning installed (its test skips)",
    ],
    "ipython8": [
        "Ultralytics < 8.3 on torch >= 2.6 needs `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1` to train",
        "Ultralytics < 8.3: the DetMetrics of `model.train()` cannot be displayed (xfail)",
        "transformers 4.x keeps no `trainer._tr_loss`",
        "no Lightning installed (its test skips)",
    ],
    "ipython9": [
        "ipykernel 7.0: comm sends from the sampler thread need the parent the main thread "
        "noted (agent fix: before it, no samples and no inventory after the first)",
        "no transformers or Lightning installed (their tests skip)",
    ],
    "torch213": [
        "PyPI's torchvision 0.28.0 does not import beside torch 2.13.0+cpu (`operator "
        "torchvision::nms does not exist`): no torchvision, so no Ultralytics; every YOLO test "
        "skips",
        "no Lightning installed (its test skips)",
    ],
    "newest": [],
}


# the table's column: a few words each; DEGRADES has the whole of it (docs/compat.md)
DEGRADES_SHORT = {
    "oldest": "FLOPs copy of each YOLO until gc; no offline switch; needs "
    "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD to train",
    "ipython8": "needs TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD to train; train() result not displayable",
    "ipython9": "none left (ipykernel 7.0's thread sends: fixed in the agent)",
    "torch213": "no torchvision, so no Ultralytics: YOLO tests skip",
    "newest": "nothing",
}


def table():
    """docs/compat.md and README.md's section between the compat:kernel markers, from
    docs/compat.json."""
    data = json.loads(DOC_JSON.read_text())["combinations"]
    rows = [
        "| combination | Python | IPython | ipykernel | torch | torchvision | Ultralytics | numpy "
        "| transformers | passed | failed | xfailed | skipped | suite | what degrades |",
        "|" + " --- |" * 15,
    ]
    for name in ORDER:
        r = data.get(name)
        if r is None:
            continue
        v = r["versions"]
        degrades = DEGRADES_SHORT.get(name) or "nothing seen"
        minutes = f"{r['suite_seconds'] / 60:.1f} min"
        rows.append(
            f"| `{name}` | {r['python']} | {v.get('ipython', '-')} | {v.get('ipykernel', '-')} "
            f"| {v.get('torch', '-')} | {v.get('torchvision', '-')} | {v.get('ultralytics', '-')} "
            f"| {v.get('numpy', '-')} | {v.get('transformers', '-')} | {r['passed']} "
            f"| {r['failed']} | {r.get('xfailed', 0)} | {r['skipped']} | {minutes} | {degrades} |"
        )
    body = "\n".join(rows)
    details = []
    for name in ORDER:
        r = data.get(name)
        if r is None:
            continue
        details.append(f"### `{name}`: {r['about']}\n")
        details.append(
            f"Kernel `{r['kernel']}`, torch from {r['torch_source']}; set up in "
            f"{r['setup_seconds']} s ({r['disk_mb']} MB on disk), suite {r['suite_seconds']} s, "
            f"run {r['date']}.\n"
        )
        for degrade in DEGRADES.get(name, []):
            details.append(f"- degrades: {degrade}")
        for note in r.get("setup_notes", []):
            details.append(f"- setup: {note}")
        for reason, count in sorted(r["skips"].items(), key=lambda kv: -kv[1]):
            details.append(f"- skipped ({count}): {reason}")
        for xfail in r.get("xfails", []):
            details.append(f"- xfailed `{xfail['test']}`: {xfail['reason']}")
        for failure in r["failures"]:
            details.append(f"- FAILED `{failure['test']}`: {failure['message']}")
        details.append("")
    doc = (
        "# Kernel-side versions the agent meets\n\n"
        "Generated by `scripts/compat.py table` from `docs/compat.json` (`make compat`: the "
        "real-kernel agent suite, `test/agent`, with the pytest process in `.venv` and the kernel "
        "in a virtualenv of each combination). Do not edit by hand.\n\n"
        f"{body}\n\n" + "\n".join(details)
    )
    DOC_MD.write_text(doc.rstrip() + "\n")
    readme = README.read_text()
    section = (
        f"{START}\n"
        "### Kernel side\n\n"
        "The agent suite in kernels of other versions (`make compat`; details and skip reasons "
        "in [docs/compat.md](docs/compat.md)):\n\n"
        f"{body}\n{END}"
    )
    if START in readme and END in readme:
        head, rest = readme.split(START, 1)
        readme = head + section + rest.split(END, 1)[1]
    else:
        readme = readme.rstrip() + "\n\n## Supported versions\n\n" + section + "\n"
    README.write_text(readme)
    prettier = ROOT / "node_modules" / ".bin" / "prettier"
    if prettier.exists():  # `make lint` checks them with prettier (the tables' padding)
        subprocess.run(
            [str(prettier), "--write", str(DOC_MD), str(DOC_JSON), str(README)],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
    else:
        log("no node_modules/.bin/prettier: run `npx prettier --write` on the files written")
    log(f"wrote {DOC_MD.relative_to(ROOT)} and README.md's kernel-side section")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["setup", "run", "all", "table", "list"])
    parser.add_argument("names", nargs="*", help="combinations (default: all, in order)")
    parser.add_argument("--subset", action="store_true", help="only the tests marked compat")
    parser.add_argument("--pytest-args", default="", help="more pytest options (one string)")
    args = parser.parse_args(argv)
    names = args.names or ORDER
    unknown = [n for n in names if n not in COMBINATIONS]
    if unknown:
        parser.error(f"unknown combinations {unknown}; known: {', '.join(ORDER)}")
    if args.command == "list":
        for name in ORDER:
            print(f"{name:10} {COMBINATIONS[name]['about']}")
        return 0
    if args.command == "table":
        table()
        return 0
    if args.command == "setup":
        for name in names:
            setup(name)
        return 0
    worst = 0
    for name in names:
        worst = max(worst, run(name, args.subset, args.pytest_args.split()))
    if args.command == "all":
        table()
    return worst


if __name__ == "__main__":
    sys.exit(main())
