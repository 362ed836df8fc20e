#!/usr/bin/env python3
"""Write the demo notebook's scratch copy for ``make lab`` (issue 29, item 7).

``examples/stacked-yolo.ipynb`` is tracked with ``language_info: {"name": "python"}`` only: the
full record names the Python patch release (``"version": "3.11.7"``), which differs per machine.
When a kernel connects, JupyterLab writes the kernel's ``language_info`` into the notebook's
metadata, and a value that differs marks the notebook modified before the user did anything.
The copy gets the ``language_info`` of the ipykernel this Python would start (the class
attribute ipykernel sends in its ``kernel_info_reply``; no kernel is started), so it opens
unmodified.

Usage: ``python scripts/demo_notebook.py SOURCE TARGET`` with the Python of the kernel that will
run the copy (``.venv/bin/python``). Exits 1 with a message when SOURCE is not an nbformat 4
notebook or ipykernel is not importable.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: demo_notebook.py SOURCE TARGET", file=sys.stderr)
        return 2
    source, target = Path(argv[1]), Path(argv[2])
    try:
        import nbformat
        from ipykernel.ipkernel import IPythonKernel
    except ImportError as error:
        print(f"demo_notebook.py: {error} (run it with .venv/bin/python)", file=sys.stderr)
        return 1
    try:
        notebook = nbformat.read(source, as_version=4)
    except (OSError, ValueError) as error:
        print(f"demo_notebook.py: cannot read {source}: {error}", file=sys.stderr)
        return 1
    notebook.metadata["language_info"] = dict(IPythonKernel.language_info)
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
