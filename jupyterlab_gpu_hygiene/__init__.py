"""JupyterLab GPU hygiene: VRAM gauge, stacked-model warnings and a one-click clean.

The Python package ships the prebuilt JupyterLab extension and a small, read-only Jupyter server
extension (``server.py``: which of the server's kernels is which pid). The kernel-side agent is
plain Python sent to each kernel by the browser; it is not imported from here.
"""

try:
    from ._version import __version__
except ImportError:  # pragma: no cover - only in a source tree that was never built
    import warnings

    warnings.warn("Importing 'jupyterlab_gpu_hygiene' outside a proper installation.", stacklevel=2)
    __version__ = "dev"


def _jupyter_labextension_paths():
    """Where JupyterLab finds the prebuilt extension (used by `jupyter labextension develop`)."""
    return [{"src": "labextension", "dest": "jupyterlab-gpu-hygiene"}]


def _jupyter_server_extension_points():
    """The server extension (enabled by ``jupyter_server_config.d/jupyterlab_gpu_hygiene.json``,
    installed with the wheel). Its module is imported only by the server, so importing this
    package does not import jupyter_server."""
    return [{"module": "jupyterlab_gpu_hygiene.server"}]
