"""The floor of the page side, as pip and the build see it (run by ``make test-floor``).

- One floor everywhere: pyproject.toml's ``jupyterlab>=`` requirement, the lowest version
  every ``@jupyterlab/*`` range of package.json admits, the versions test/floor/package.json
  type-checks against and the JupyterLab of test/floor/requirements.txt are the same release.
- pip refuses a JupyterLab below it: in the floor's venv (``FLOOR_VENV``: JupyterLab 4.0.2), a
  dry-run install of the wheel (``FLOOR_DIST``) beside JupyterLab 4.0.1 (its real wheel, from
  ``FLOOR_BELOW``) fails on the extension's requirement, and the same install beside the floor
  itself would go through. ``--no-index``: nothing but those two folders is looked at.
"""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
FLOOR = Version("4.0.2")


def floor_of(npm_range):
    """The lowest version a caret range (``^4.0.2``) admits."""
    match = re.fullmatch(r"\^(\d+\.\d+\.\d+)", npm_range)
    assert match, f"not a caret range: {npm_range}"
    return Version(match.group(1))


def test_one_floor_in_pyproject_package_json_and_the_floor_environment():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (lab,) = [Requirement(r) for r in project["dependencies"] if r.startswith("jupyterlab")]
    assert lab.specifier.contains(str(FLOOR))
    assert not lab.specifier.contains("4.0.1")
    assert not lab.specifier.contains("5.0.0")

    ranges = json.loads((ROOT / "package.json").read_text())["dependencies"]
    pinned = json.loads((ROOT / "floor/package.json").read_text())["dependencies"]
    jupyterlab = {name: r for name, r in ranges.items() if name.startswith("@jupyterlab/")}
    assert jupyterlab, "package.json names no @jupyterlab package"
    for name, npm_range in ranges.items():
        if name.startswith(("@jupyterlab/", "@lumino/")):
            # type-checked against exactly the floor of its range
            assert Version(pinned[name]) == floor_of(npm_range), name
    # @jupyterlab/application carries JupyterLab's own version number
    assert floor_of(jupyterlab["@jupyterlab/application"]) == FLOOR

    wanted = [
        Requirement(line)
        for line in (ROOT / "floor/requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert {r.name: str(r.specifier) for r in wanted}["jupyterlab"] == f"=={FLOOR}"


def test_the_labextension_is_built_against_the_floors_core_metadata():
    """floor/core.package.json is JupyterLab 4.0.2's own (jupyterlab/staging/package.json of
    its wheel, installed in the floor's venv), unchanged; the build script names it."""
    python, _, _ = floor_env()
    where = "import jupyterlab, pathlib; print(pathlib.Path(jupyterlab.__file__).parent)"
    lab = subprocess.run(
        [str(python), "-c", where], capture_output=True, text=True, check=True
    ).stdout.strip()
    staging = Path(lab) / "staging" / "package.json"
    ours = (ROOT / "floor/core.package.json").read_bytes()
    assert ours == staging.read_bytes()
    assert json.loads(ours)["version"] == str(FLOOR)
    scripts = json.loads((ROOT / "package.json").read_text())["scripts"]
    for name in ("build:labextension", "build:labextension:dev"):
        assert "--core-package-file floor/core.package.json" in scripts[name], name


def test_what_the_built_labextension_requires_the_floor_provides():
    """The shared modules the built labextension consumes (its remoteEntry's
    ``shareKey``/``requiredVersion`` pairs, as the page's module federation checks them) are
    all satisfied by the floor's versions: no "Unsatisfied version" in JupyterLab 4.0.2."""
    static = ROOT / "jupyterlab_gpu_hygiene/labextension/static"
    (entry,) = static.glob("remoteEntry.*.js")
    consumed = dict(
        re.findall(r'shareKey:"([^"]+)",import:[^,]*,requiredVersion:"([^"]+)"', entry.read_text())
    )
    floor = json.loads((ROOT / "floor/package.json").read_text())["dependencies"]
    shared = {k: v for k, v in consumed.items() if k.startswith(("@jupyterlab/", "@lumino/"))}
    assert "@jupyterlab/services" in shared, consumed
    for name, required in shared.items():
        assert floor_of(required) <= Version(floor[name]), (name, required, floor[name])


def floor_env():
    names = ("FLOOR_VENV", "FLOOR_DIST", "FLOOR_BELOW")
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        pytest.fail(f"run by make test-floor, which sets {', '.join(missing)}")
    venv, dist, below = (Path(os.environ[n]) for n in names)
    (wheel,) = dist.glob("jupyterlab_gpu_hygiene-*.whl")
    return venv / "bin" / "python", wheel, below


def dry_run(python, wheel, below, lab):
    return subprocess.run(
        [
            str(python), "-m", "pip", "install", "--dry-run", "--no-index",
            "--find-links", str(wheel.parent), "--find-links", str(below),
            str(wheel), f"jupyterlab=={lab}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )  # fmt: skip


def test_pip_refuses_a_jupyterlab_below_the_floor():
    python, wheel, below = floor_env()
    refused = dry_run(python, wheel, below, "4.0.1")
    assert refused.returncode != 0, refused.stdout
    said = refused.stdout + refused.stderr
    assert "ResolutionImpossible" in said or "conflicting dependencies" in said, said
    version = re.escape(wheel.name.split("-")[1])
    floor = re.escape(str(FLOOR))
    depends = rf"jupyterlab[-_]gpu[-_]hygiene {version} depends on jupyterlab<5(,| and )>={floor}"
    assert re.search(depends, said, re.I), said


def test_pip_takes_the_wheel_beside_the_floor():
    python, wheel, below = floor_env()
    taken = dry_run(python, wheel, below, FLOOR)
    assert taken.returncode == 0, taken.stdout + taken.stderr
    # the floor's venv has this wheel installed already (make test-floor's smoke test runs it)
    version = re.escape(wheel.name.split("-")[1])
    would = rf"Would install .*jupyterlab[-_]gpu[-_]hygiene-{version}"
    installed = "is already installed with the same version as the provided wheel"
    assert re.search(would, taken.stdout, re.I) or installed in taken.stdout, taken.stdout
    assert "conflict" not in taken.stdout + taken.stderr
