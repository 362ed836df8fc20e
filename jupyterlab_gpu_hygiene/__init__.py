"""JupyterLab GPU hygiene: VRAM gauge, stacked-model warnings and a one-click clean.

The Python package only ships the prebuilt JupyterLab extension. The kernel-side agent is
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
