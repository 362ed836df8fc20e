# jupyterlab-gpu-hygiene loader. The browser runs it in a silent execute request as
#     exec(LOADER, {"SOURCE": AGENT_SOURCE, "CONFIG": CONFIG_JSON})
# so its names live in that throwaway globals dict, never in the user namespace. SOURCE is the
# payload: a JSON list of [name, source text] pairs (the submodules of the agent package in
# dependency order, its MODULES, then "__init__"), UTF-8, zlib-compressed and base64-encoded: a
# third of the characters, which ipykernel and IPython handle one by one for every cell (the
# debugger's cell name is a pure-Python hash of the whole code). The loader registers the
# package _jupyterlab_gpu_hygiene_agent (a module object with __path__ = []) and each submodule
# _jupyterlab_gpu_hygiene_agent.<name> in sys.modules, runs it there (so "from . import walk"
# resolves from sys.modules: no file is written, sys.path is not touched), sets it as an
# attribute of the package, runs "__init__" in the package object, and calls
# install(config, previous).
#
# It never raises and never prints. On any failure (a module that does not compile or import,
# install() returning "failed"), and when install() keeps the running agent ("kept"), the loader
# removes every sys.modules entry it made and puts back the entries of the previous copy. A
# failure is recorded as the attribute LOAD_ERROR (str) of the package left in sys.modules: the
# previous one when its agent still runs, else a bare package object that holds only LOAD_ERROR.
try:
    import base64 as _base64
    import json as _json
    import sys as _sys
    import types as _types
    import zlib as _zlib

    _NAME = "_jupyterlab_gpu_hygiene_agent"

    def _ours(key):
        return key == _NAME or (isinstance(key, str) and key.startswith(_NAME + "."))

    # the previous copy: 0.2.0's single module, or a package and its submodules
    _saved = {k: v for k, v in list(_sys.modules.items()) if _ours(k)}
    _previous = _saved.get(_NAME)

    def _restore():
        for _key in [k for k in list(_sys.modules) if _ours(k)]:
            _sys.modules.pop(_key, None)
        _sys.modules.update(_saved)

    try:
        _config = _json.loads(CONFIG) if isinstance(CONFIG, str) else CONFIG  # noqa: F821
        if not isinstance(_config, dict):
            _config = {}
    except Exception:
        _config = {}
    _package = _types.ModuleType(_NAME, "jupyterlab-gpu-hygiene kernel agent")
    _package.__path__ = []
    _package.__package__ = _NAME
    _package.LOAD_ERROR = None

    def _fail(message):
        # back to the previous copy; LOAD_ERROR on it if its agent runs, else on a bare package
        _restore()
        keep = _sys.modules.get(_NAME)
        if getattr(keep, "_agent", None) is None:
            for key in [k for k in list(_sys.modules) if _ours(k)]:
                _sys.modules.pop(key, None)
            keep = _types.ModuleType(_NAME, "jupyterlab-gpu-hygiene kernel agent (not loaded)")
            keep._agent = None
            _sys.modules[_NAME] = keep
        keep.LOAD_ERROR = message

    try:
        try:
            _text = _zlib.decompress(_base64.b64decode(SOURCE, validate=True))  # noqa: F821
        except Exception as _exc:
            raise ValueError(f"the agent payload is not base64 of zlib data ({_exc})") from None
        _modules = _json.loads(_text)
        if not isinstance(_modules, list) or not _modules:
            raise TypeError("the agent payload is not a list of modules")
        for _key in [k for k in list(_sys.modules) if _ours(k)]:
            _sys.modules.pop(_key, None)  # no submodule of the previous copy is imported by name
        _sys.modules[_NAME] = _package
        for _sub, _text in _modules:
            _file = f"<jupyterlab-gpu-hygiene agent {_sub}.py>"
            if _sub == "__init__":
                exec(compile(_text, _file, "exec"), _package.__dict__)
                continue
            _module = _types.ModuleType(f"{_NAME}.{_sub}")
            _module.__package__ = _NAME
            _sys.modules[_module.__name__] = _module
            exec(compile(_text, _file, "exec"), _module.__dict__)
            setattr(_package, _sub, _module)
        _status = _package.install(_config, _previous)
    except Exception as _exc:
        try:
            _message = f"{type(_exc).__name__}: {_exc}"
        except Exception:
            _message = type(_exc).__name__
        _fail(_message)
    else:
        if _status == "failed":
            try:  # noqa: SIM105 -- stop whatever install() had started
                _package.uninstall()
            except Exception:
                pass
            _fail("; ".join(m for _w, m in _package._install_errors) or "failed")
        elif _status == "kept":
            _restore()
except Exception:
    pass
