"""The package as an editor sees it: every public name of the native module
is in its type stubs (_tether.pyi), with each class's public members, and
every public name has a docstring."""
import ast
import inspect
import pathlib

import tether
from tether import _tether

STUBS = pathlib.Path(tether.__file__).with_name("_tether.pyi")


def stub_names():
    tree = ast.parse(STUBS.read_text())
    top, members = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            top.add(node.target.id)
        elif isinstance(node, ast.Assign):
            top.update(t.id for t in node.targets)
        if isinstance(node, ast.ClassDef):
            members[node.name] = {
                n.name if isinstance(n, ast.FunctionDef) else n.target.id
                for n in node.body if isinstance(n, (ast.FunctionDef, ast.AnnAssign))}
    return top, members


def public(names):
    return sorted(n for n in names if not n.startswith("_"))


def test_every_native_name_and_member_is_in_the_stubs():
    top, members = stub_names()
    missing = [n for n in public(dir(_tether)) if n not in top]
    assert not missing, "not in _tether.pyi: %s" % missing
    for name in public(dir(_tether)):
        cls = getattr(_tether, name)
        if not inspect.isclass(cls) or issubclass(cls, BaseException):
            continue
        absent = [m for m in public(vars(cls)) if m not in members.get(name, ())]
        assert not absent, "%s members not in _tether.pyi: %s" % (name, absent)


def undocumented(obj, name):
    doc = inspect.getdoc(obj) or ""
    # pybind11's generated first line is only a signature: not a docstring.
    lines = [ln for ln in doc.splitlines() if ln.strip()]
    if not lines or (len(lines) == 1 and lines[0].startswith(name.split(".")[-1] + "(")):
        return [name]
    return []


def test_every_public_name_has_a_docstring():
    missing = []
    for name in tether.__all__:
        obj = getattr(tether, name)
        if isinstance(obj, bool):
            continue
        missing += undocumented(obj, name)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            for cls in obj.__mro__:
                if cls.__module__.startswith("tether"):
                    for m in public(vars(cls)):
                        missing += undocumented(getattr(obj, m), "%s.%s" % (name, m))
        if inspect.ismodule(obj):
            for m in public(vars(obj)):
                member = getattr(obj, m)
                if (inspect.isfunction(member) or inspect.isclass(member)) and \
                        member.__module__ == obj.__name__:
                    missing += undocumented(member, "%s.%s" % (name, m))
    assert not missing, "no docstring: %s" % sorted(set(missing))
