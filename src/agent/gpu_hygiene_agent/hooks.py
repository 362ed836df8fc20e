"""Forward hooks that feed a graph holder: ``h = model[0].register_forward_hook(lambda m, i, o:
feats.append(o))`` run without ``torch.no_grad()`` appends every output with its autograd
graph, so ``feats`` keeps far more than its tensors. For each graph holder, the hooks of the
user's models (their submodules too) whose function refers to the holder's object are named
(``hooks`` of a ``graphs`` row): the module's path from the variable that names the model and
the hook's key in ``_forward_hooks``, so that the fix can remove exactly that hook.

A hook function is read like a debugger would, never called: its closure cells, its
defaults, its code's global names looked up in the user namespace when it was defined there,
a bound method's instance attributes, a ``functools.partial``'s arguments. Modules are walked
through their ``_modules`` dicts, read with ``util.vars_of`` (no ``named_modules()``, which a
subclass may override)."""

import functools
import types

from . import peek
from .limits import MAX_HOOK_MODULES, MAX_HOOKS_PER_HOLDER
from .util import short, vars_of

_FUNCTION = types.FunctionType
_METHOD = types.MethodType
_PARTIAL = functools.partial


def _child_label(key):
    """``[0]`` for a numbered child (``nn.Sequential``), ``.name`` otherwise."""
    if type(key) is str and key.isdigit():
        return f"[{key}]"
    return f".{key}" if type(key) is str else "[\u2026]"


def _refers(fn, target, user_ns, depth=0):
    """Whether the hook function ``fn`` refers to ``target`` (by identity), as read without
    calling anything."""
    if depth > 3:
        return False
    cls = type(fn)
    if cls is _PARTIAL:
        return any(a is target for a in fn.args) or _refers(fn.func, target, user_ns, depth + 1)
    if cls is _METHOD:
        owner = fn.__self__
        return owner is target or any(v is target for v in vars_of(owner).values())
    if cls is not _FUNCTION:
        return False
    for cell in fn.__closure__ or ():
        try:
            if cell.cell_contents is target:
                return True
        except ValueError:  # an empty cell
            continue
    if any(d is target for d in fn.__defaults__ or ()):
        return True
    if fn.__globals__ is user_ns:
        names = fn.__code__.co_names
        return any(type(n) is str and dict.get(user_ns, n) is target for n in names)
    return False


def _hooked_modules(variables, module_type):
    """(variable, keys, path, {key: hook}) of the modules under the user's model variables that
    have forward hooks (``keys``: the ``_modules`` keys from the variable's model down to the
    module; ``path``: "m[0]"), at most ``MAX_HOOK_MODULES`` modules looked at."""
    out = []
    seen = set()
    left = MAX_HOOK_MODULES
    for name, value in variables:
        if not peek.is_a(value, module_type):
            continue
        stack = [((), name, value)]
        while stack and left > 0:
            keys, path, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            left -= 1
            attrs = vars_of(module)
            hooks = attrs.get("_forward_hooks")
            # the type first: the truth of a dict subclass is its own __len__ or __bool__
            if peek.is_a(hooks, dict) and dict.__len__(hooks):
                out.append((name, keys, path, dict(dict.items(hooks))))
            children = attrs.get("_modules")
            if peek.is_a(children, dict) and dict.__len__(children):
                for key, child in reversed(list(dict.items(children))):
                    if type(key) is str and child is not None and peek.is_a(child, module_type):
                        stack.append(((*keys, key), path + _child_label(key), child))
    return out


def feeding_hooks(rows, variables, user_ns, module_type):
    """Add ``hooks`` to the ``graphs`` rows (dicts) fed by a forward hook: [{module: the
    module's path from the variable naming its model ("m[0]", "net.encoder.layer[3]"),
    variable: that variable, modules: the ``_modules`` keys from its model to the module,
    key: the hook's key in ``_forward_hooks`` (int)}], at most ``MAX_HOOKS_PER_HOLDER`` per
    row. Looks only when there are rows."""
    if not rows:
        return
    values = dict(variables)
    hooked = None
    for row in rows:
        target = values.get(row.get("name"))
        if target is None:
            continue
        if hooked is None:
            hooked = _hooked_modules(variables, module_type)
            if not hooked:
                return
        found = []
        for variable, keys, path, hooks in hooked:
            for key, fn in hooks.items():
                try:
                    feeds = _refers(fn, target, user_ns)
                except Exception:
                    feeds = False
                if feeds and type(key) is int:
                    found.append(
                        {
                            "module": short(path),
                            "variable": short(variable),
                            "modules": [short(k) for k in keys],
                            "key": key,
                        }
                    )
        if found:
            row["hooks"] = found[:MAX_HOOKS_PER_HOLDER]
