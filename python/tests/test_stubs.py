"""The package's types agree with what it is: every name of the extension has a stub in
symmem/_native.pyi whose parameters (names, kinds, defaults) are the extension's own
(pyo3's ``__text_signature__``); every function of every Python module of the package
(each .py file of the installed package, found here, so a new module is checked without
editing this file) is fully annotated, each module's ``__all__`` lists every public name
and nothing else, and ``py.typed`` ships. A new parameter (``stream=``) or function
without its stub fails here. Not collective."""

import ast
import inspect
import pathlib
import types

import pytest

import symmem
from symmem import _native

PACKAGE = pathlib.Path(symmem.__file__).parent

#: Members of a native class that Python gives every class, or that say nothing typed.
GENERIC_MEMBERS = {"__doc__", "__module__", "__new__", "__dict__", "__weakref__", "__repr__",
                   "__str__", "__reduce__", "__qualname__", "__init__", "__final__"}


def is_protocol(node):
    """A typing-only class of the stub (no runtime counterpart, a private name)."""
    return node.name.startswith("_") and any(
        isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases)


def stub_params(fn, method):
    """(name, kind, default) of each parameter of stub function `fn` (`self` dropped for
    a method); the default as a value, or `...` where the stub writes none usable."""
    a = fn.args
    out = []
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for i, (p, d) in enumerate(zip(positional, defaults)):
        kind = "POSITIONAL_ONLY" if i < len(a.posonlyargs) else "POSITIONAL_OR_KEYWORD"
        out.append((p.arg, kind, literal(d)))
    if a.vararg:
        out.append((a.vararg.arg, "VAR_POSITIONAL", inspect.Parameter.empty))
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append((p.arg, "KEYWORD_ONLY", literal(d)))
    if a.kwarg:
        out.append((a.kwarg.arg, "VAR_KEYWORD", inspect.Parameter.empty))
    if method:
        out = out[1:]
    # pyo3 methods take `self` positionally only; the stub's self is dropped above, and
    # a method's other parameters are compared by name, kind and default.
    return [(n, "POSITIONAL_OR_KEYWORD" if k == "POSITIONAL_ONLY" else k, d) for n, k, d in out]


def literal(node):
    if node is None:
        return inspect.Parameter.empty
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ...


def runtime_params(obj, method):
    params = list(inspect.signature(obj).parameters.values())
    if method:
        params = params[1:]
    return [(p.name, "POSITIONAL_OR_KEYWORD" if p.kind is p.POSITIONAL_ONLY else p.kind.name,
             p.default) for p in params]


def render(params):
    """Parameters as a signature reads: ``(dst, src, *, op='set')``."""
    out, star = [], False
    for n, k, d in params:
        if k == "VAR_POSITIONAL":
            out.append(f"*{n}")
            star = True
        elif k == "KEYWORD_ONLY" and not star:
            out.append("*")
            star = True
        if k != "VAR_POSITIONAL":
            out.append(("**" if k == "VAR_KEYWORD" else "") + n
                       + ("" if d is inspect.Parameter.empty else f"={d!r}"))
    return f"({', '.join(out)})"


def same(stub, runtime, what):
    assert [(n, k) for n, k, _ in stub] == [(n, k) for n, k, _ in runtime], \
        f"{what}: the stub says {render(stub)} but it takes {render(runtime)}"
    for (n, _, sd), (_, _, rd) in zip(stub, runtime):
        if sd is ... or rd is ...:
            continue
        assert sd == rd, f"{what}: parameter {n} defaults to {sd!r} in the stub, {rd!r} in the extension"


#: Each stub file, and the module it types: the extension (the Python modules carry their
#: annotations inline, one source of truth).
STUBS = {"_native.pyi": "symmem._native"}

#: Every Python module of the installed package, by its file: ``symmem`` for
#: ``__init__.py``, else ``symmem.<name>``. No module is left out.
MODULES = sorted("symmem" if f.stem == "__init__" else f"symmem.{f.stem}"
                 for f in PACKAGE.glob("*.py"))

#: Packages a module may need that the package does not depend on: a module that needs
#: one that is not installed is skipped, not failed.
OPTIONAL = {"torch", "numpy", "triton"}


def module_file(module):
    return PACKAGE / ("__init__.py" if module == "symmem" else f"{module.split('.')[1]}.py")


def import_module(module):
    """`module` imported, or the test skipped when an optional package it needs is absent."""
    try:
        return __import__(module, fromlist=["_"])
    except ModuleNotFoundError as e:
        if e.name in OPTIONAL:
            pytest.skip(f"{module} needs {e.name}")
        raise


def stub_tree(stub):
    return ast.parse((PACKAGE / stub).read_text(), filename=stub)


def runtime_names(module):
    """The names a stub must cover: every name of the extension, or a Python module's
    ``__all__``."""
    if module.__name__ == "symmem._native":
        return {n for n in dir(module) if not n.startswith("__")}
    return set(module.__all__)


@pytest.mark.parametrize("stub", sorted(STUBS))
def test_every_name_has_a_stub_and_every_stub_a_name(stub):
    module = __import__(STUBS[stub], fromlist=["_"])
    stubbed = set()
    for node in stub_tree(stub).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not (
                isinstance(node, ast.ClassDef) and is_protocol(node)):
            stubbed.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            stubbed.add(node.target.id)
    names = runtime_names(module)
    assert names - stubbed == set(), f"no stub in {stub} for {sorted(names - stubbed)}"
    absent = {n for n in stubbed if not hasattr(module, n)}
    assert absent == set(), f"{stub} types names {module.__name__} lacks: {sorted(absent)}"


@pytest.mark.parametrize("stub", sorted(STUBS))
def test_every_stubbed_function_takes_the_modules_parameters(stub):
    module = __import__(STUBS[stub], fromlist=["_"])
    checked = 0
    for node in stub_tree(stub).body:
        if isinstance(node, ast.FunctionDef):
            same(stub_params(node, False), runtime_params(getattr(module, node.name), False),
                 f"{module.__name__}.{node.name}")
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("stub", sorted(STUBS))
def test_every_class_member_has_a_stub_with_its_parameters(stub):
    module = __import__(STUBS[stub], fromlist=["_"])
    native = module is _native
    for node in stub_tree(stub).body:
        if not isinstance(node, ast.ClassDef) or is_protocol(node):
            continue
        cls = getattr(module, node.name)
        bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
        assert [c.__name__ for c in cls.__bases__] == (bases or ["object"]), node.name
        if issubclass(cls, BaseException):
            continue
        members = {m.name: m for m in node.body if isinstance(m, ast.FunctionDef)}
        runtime = {k for k, v in vars(cls).items() if k not in GENERIC_MEMBERS
                   and (native or (callable(v) and not k.startswith("_")))}
        assert runtime - set(members) == set(), \
            f"{node.name}: no stub for {sorted(runtime - set(members))}"
        for name, m in members.items():
            if name in ("__init__", "__new__"):
                # A constructor (#[new], or a Python class's __init__): the class's own
                # signature.
                same(stub_params(m, True), runtime_params(cls, False), f"{node.name}()")
                continue
            assert name in vars(cls), f"{node.name}.{name} is stubbed but does not exist"
            value = vars(cls)[name]
            is_property = any(isinstance(d, ast.Name) and d.id == "property"
                              for d in m.decorator_list)
            if is_property:
                assert inspect.isdatadescriptor(value), f"{node.name}.{name} is not a property"
            else:
                same(stub_params(m, True), runtime_params(value, True), f"{node.name}.{name}")


def test_every_module_of_the_package_is_checked():
    assert "symmem" in MODULES and "symmem.rendezvous" in MODULES and len(MODULES) >= 5
    # A stub beside a Python module would be a second source of truth that drifts.
    stubs = sorted(p.name for p in PACKAGE.glob("*.pyi"))
    assert stubs == sorted(STUBS), \
        f"stubs {stubs}: only the extension has one ({sorted(STUBS)}); annotate a Python " \
        "module inline"


def unannotated(tree):
    """``(function, what it lacks)`` for every function (methods, nested functions and the
    ``_`` fakes of custom ops included) of module `tree` lacking a type on a parameter or
    its return; ``self``/``cls`` of a method need none."""
    def visit(node, in_class, where):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, True, f"{where}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = child.args
                params = a.posonlyargs + a.args + a.kwonlyargs
                static = any(isinstance(d, ast.Name) and d.id == "staticmethod"
                             for d in child.decorator_list)
                if in_class and not static and params and params[0].arg in ("self", "cls"):
                    params = params[1:]
                params += [p for p in (a.vararg, a.kwarg) if p is not None]
                bare = [p.arg for p in params if p.annotation is None]
                name = f"{where}{child.name} (line {child.lineno})"
                if bare:
                    yield name, f"parameters without a type: {bare}"
                if child.returns is None:
                    yield name, "no return type"
                visit(child, False, f"{where}{child.name}.")
            else:
                visit(child, in_class, where)

    return list(visit(tree, False, ""))


@pytest.mark.parametrize("module", MODULES)
def test_every_python_function_is_annotated(module):
    path = module_file(module)
    missing = unannotated(ast.parse(path.read_text(), filename=str(path)))
    assert not missing, f"{module}: " + "; ".join(f"{n}: {w}" for n, w in missing)


@pytest.mark.parametrize("module", MODULES)
def test_all_lists_every_public_name(module):
    mod = import_module(module)
    assert hasattr(mod, "__all__"), f"{module} has no __all__"
    missing = [n for n in mod.__all__ if not hasattr(mod, n)]
    assert not missing, f"{module}.__all__ names what it lacks: {missing}"
    public = {n for n, v in vars(mod).items()
              if not n.startswith("_") and not isinstance(v, types.ModuleType)
              and getattr(v, "__module__", module).startswith("symmem")
              and not (module != "symmem" and n in ("symmem",))}
    assert public - set(mod.__all__) == set(), \
        f"{module}: public names missing from __all__: {sorted(public - set(mod.__all__))}"


def test_the_exported_natives_keep_their_signatures_through_the_error_naming():
    # The package wraps them (errors name the operation): the signature stays the stub's.
    assert str(inspect.signature(symmem.put)) == "(dst, src, pe, stream=None)"
    assert inspect.signature(symmem.Team.world_pe).parameters.keys() == {"self", "pe"}


def test_py_typed_ships_with_the_stubs():
    assert (PACKAGE / "py.typed").exists()
    assert all((PACKAGE / stub).exists() for stub in STUBS)


def test_the_exceptions_live_where_their_module_says():
    # So that they pickle (multiprocessing, a worker's error sent back to its parent).
    import pickle

    for cls in (symmem.SymmemError, symmem.UnfreedArrayWarning):
        assert cls.__module__ == "symmem._native" and getattr(_native, cls.__name__) is cls
        assert type(pickle.loads(pickle.dumps(cls("x")))) is cls
