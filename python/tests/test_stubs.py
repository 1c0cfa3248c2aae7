"""The .pyi stubs describe what the modules have: every public name, with the same parameters."""
import ast
import inspect
import re
from pathlib import Path

import pytest

import moec
import moec._moec
import moec.torch


def stub_functions(module):
    """name -> parameter names, for the functions and classes of the module's .pyi."""
    path = Path(module.__file__)
    stub = path.with_name(path.name.split(".")[0] + ".pyi")
    tree = ast.parse(stub.read_text())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            a = node.args
            found[node.name] = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
        elif isinstance(node, ast.ClassDef):
            found[node.name] = None
    return found


def parameters(function):
    return [p.name for p in inspect.signature(function).parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


@pytest.mark.parametrize("module,names", [
    (moec, moec.__all__),
    (moec.torch, ["moe_init_routing_v2_grad", "moe_token_unpermute_with_routing_map_grad", "moe_unpermute", "_paired"]),
])
def test_python_modules_match_their_stubs(module, names):
    stubs = stub_functions(module)
    for name in names:
        assert name in stubs, f"{module.__name__}.{name} has no stub"
        value = getattr(module, name)
        if inspect.isfunction(value):
            assert stubs[name] == parameters(value), name


def test_the_compiled_module_matches_its_stub():
    stubs = stub_functions(moec._moec)
    public = [n for n in dir(moec._moec) if not n.startswith("_")]
    assert sorted(public) == sorted(stubs)
    for name in public:
        value = getattr(moec._moec, name)
        if callable(value) and not isinstance(value, type):
            # pybind11 functions carry their signature in the first line of the docstring.
            first = value.__doc__.splitlines()[0]
            named = re.findall(r"(?:^|, )(\w+): ", first[first.index("(") + 1:first.rindex(")")])
            assert named == stubs[name], name
