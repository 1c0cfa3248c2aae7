"""moec.list_ops, moec.emit and moec.plan give what `moec list`, `moec emit` and `moec plan` print; the
docstrings show each op's signature as `moec list` prints it."""
import json
import os
import subprocess

import pytest

import moec
from conftest import BINARY_DIR

MOEC = BINARY_DIR / "bin" / "moec"
needs_cli = pytest.mark.skipif(not MOEC.exists(), reason=f"{MOEC} is not built")


def cli(*args, **kwargs) -> str:
    return subprocess.run([str(MOEC), *args], check=True, capture_output=True, text=True, env=os.environ,
                          **kwargs).stdout


@needs_cli
def test_list_ops_is_moec_list():
    ops = moec.list_ops()
    assert sorted(ops) == ["moe_init_routing_v2_grad", "moe_token_unpermute_with_routing_map_grad", "moe_unpermute"]
    assert "".join(text + "\n\n" for text in ops.values()) == cli("list")


@needs_cli
@pytest.mark.parametrize("args", [
    dict(op="moe_init_routing_v2_grad", stage="loops", target="cpu", dims={"H": 128}, attrs={"top_k": 2}),
    dict(op="moe_token_unpermute_with_routing_map_grad", stage="moe", target="ptx", arch="sm_80", dtype="bf16",
         dims={"H": 64, "E": 8}, with_=["routing_map", "permuted_tokens", "probs"], schedule="vector=4"),
    dict(op="moe_unpermute", stage="gen", target="ascend", chip="310p", dtype="f16",
         dims={"H": 32, "E": 4, "K": 2}),
])
def test_emit_is_moec_emit(args, tmp_path):
    text = moec.emit(**args, dump_dir=str(tmp_path / "python"))
    argv = ["emit", args["op"], "--emit", args["stage"], "--target", args["target"],
            "--dtype", args.get("dtype", "f32"), "--dump-dir", str(tmp_path / "cli")]
    argv += ["--arch", args["arch"]] if "arch" in args else []
    argv += ["--chip", args["chip"]] if "chip" in args else []
    argv += [x for name, value in args.get("dims", {}).items() for x in ("--dim", f"{name}={value}")]
    argv += [x for name, value in args.get("attrs", {}).items() for x in ("--attr", f"{name}={value}")]
    argv += [x for name in args.get("with_", []) for x in ("--with", name)]
    argv += ["--vector", "4"] if "schedule" in args else []
    assert text == cli(*argv)
    written = sorted(p.name for p in (tmp_path / "python").iterdir())
    assert written == sorted(p.name for p in (tmp_path / "cli").iterdir())
    for name in written:
        assert (tmp_path / "python" / name).read_text() == (tmp_path / "cli" / name).read_text(), name


@needs_cli
def test_plan_is_moec_plan(tmp_path):
    p = moec.plan("moe_init_routing_v2_grad", "bf16", dims={"N": 4096, "H": 7168}, attrs={"top_k": 8}, chip="910b")
    table = cli("plan", "moe_init_routing_v2_grad", "--target", "ascend", "--chip", "910b", "--dtype", "bf16",
                "--dim", "N=4096", "--dim", "H=7168", "--attr", "top_k=8", "--json", str(tmp_path / "plan.json"),
                "--header", str(tmp_path / "tiling.h"))
    assert str(p) == p.table == table
    assert p.json == json.loads((tmp_path / "plan.json").read_text())
    assert p.json_text == (tmp_path / "plan.json").read_text()
    assert p.header == (tmp_path / "tiling.h").read_text()


def test_docstrings_show_the_signatures():
    ops = moec.list_ops()
    for name, text in ops.items():
        assert text.splitlines()[0] in moec.get.__doc__, name
        assert moec.signature(name) == text
    kernel = moec.get("moe_unpermute", "f32", dims={"H": 16, "E": 4, "K": 2}, target="cpu")
    assert ops["moe_unpermute"] in kernel.__doc__
    assert kernel.signature == ops["moe_unpermute"]
    assert kernel.inputs == ["hidden_states_unzipped", "zipped_expertwise_rowmap", "expert_routemap_topk",
                             "token_prob_unzipped"]
    assert kernel.outputs == ["hidden_states", "expert_prob_topk"]
    assert kernel.dtypes["token_prob_unzipped"] == "f32" and kernel.dtypes["zipped_expertwise_rowmap"] == "i32"
    import moec.torch as mt
    assert ops["moe_unpermute"].splitlines()[0] in mt.moe_unpermute.__doc__
