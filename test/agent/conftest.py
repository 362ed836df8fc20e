"""Fixtures for the agent tests; the kernel driver itself is ``kernel_driver.py`` (shared with
scripts/gpu_check.py and bench/): ``Kernel`` (a real ipykernel and a blocking client),
``Kernel.inject`` (the agent package sent like the browser sends it: one payload of its modules,
``agent_source``), ``Kernel.open_comm`` (the browser side of the comm), ``Kernel.run`` (a user
cell), and ``load_agent`` (the package loaded in this process, for the tests without a
kernel)."""

import pytest
from kernel_driver import (  # noqa: F401 -- re-exported for the test modules
    AGENT_DIR,
    AGENT_PATH,
    AGENT_VERSION,
    CASES_DIR,
    LOADER_PATH,
    MODULE,
    MODULES,
    PROTOCOL,
    ROOT,
    TARGET,
    THREAD,
    Comm,
    Kernel,
    Result,
    agent_modules,
    agent_source,
    clean_cell_generator,
    compile_cleanup,
    holder_names,
    install_code,
    load_agent,
    loader_source,
    model_by_order,
    notebook_cells,
)


@pytest.fixture
def new_kernel():
    """Factory of fresh kernels, all shut down at the end of the test."""
    kernels = []

    def factory(**kwargs):
        kernel = Kernel(**kwargs)
        kernels.append(kernel)
        return kernel

    yield factory
    for kernel in kernels:
        kernel.shutdown()


@pytest.fixture(scope="module")
def module_kernel():
    """One kernel shared by the tests of a module (they must not depend on each other's
    execution counts)."""
    kernel = Kernel()
    yield kernel
    kernel.shutdown()


def read_cells(case_id):
    """Code cells (list of str) of a case notebook."""
    path = CASES_DIR / f"{case_id}.ipynb"
    if not path.exists():
        pytest.skip(f"case notebook {path} not available")
    return notebook_cells(path)


@pytest.fixture(scope="session")
def generate_clean_cell():
    """The browser's clean-cell generator (``src/analysis/cleanup.ts``), run through node.

    Returns ``generate(inventory) -> str``: ``generateCleanCell(planClean(inventory))`` for an
    inventory message as the agent sent it, so these tests execute exactly the code the
    extension inserts (no Python copy of the generator).
    """
    return clean_cell_generator(compile_cleanup(ROOT / ".make" / "pytest-ts"))
