# jupyterlab-gpu-hygiene loader. The browser runs it in a silent execute request as
#     exec(LOADER, {"SOURCE": AGENT_SOURCE, "CONFIG": CONFIG_JSON})
# so its names live in that throwaway globals dict, never in the user namespace. It builds the
# module _jupyterlab_gpu_hygiene_agent from SOURCE, puts it in sys.modules and calls
# install(config, previous). It never raises and never prints: a failure is recorded as the
# module attribute LOAD_ERROR (str) of the module left in sys.modules.
try:
    import json as _json
    import sys as _sys
    import types as _types

    _NAME = "_jupyterlab_gpu_hygiene_agent"
    _previous = _sys.modules.get(_NAME)
    _module = _types.ModuleType(_NAME, "jupyterlab-gpu-hygiene kernel agent")
    _module.LOAD_ERROR = None
    try:
        _config = _json.loads(CONFIG) if isinstance(CONFIG, str) else CONFIG  # noqa: F821
        if not isinstance(_config, dict):
            _config = {}
    except Exception:
        _config = {}
    try:
        _code = compile(SOURCE, "<jupyterlab-gpu-hygiene agent>", "exec")  # noqa: F821
        exec(_code, _module.__dict__)
        _sys.modules[_NAME] = _module
        if _module.install(_config, _previous) == "failed":
            _module.LOAD_ERROR = "; ".join(m for _w, m in _module._install_errors) or "failed"
    except Exception as _exc:
        try:
            _message = f"{type(_exc).__name__}: {_exc}"
        except Exception:
            _message = type(_exc).__name__
        _keep = _previous if getattr(_previous, "_agent", None) is not None else _module
        _keep.LOAD_ERROR = _message
        _sys.modules[_NAME] = _keep
except Exception:
    pass
