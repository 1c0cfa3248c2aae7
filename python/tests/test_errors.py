"""Bad input from Python gets the runtime's named errors (ValueError subclasses) and leaves the outputs
untouched; failures to compile or to reach a GPU are RuntimeErrors."""
import numpy as np
import pytest
import torch

import fake_dlpack
import moec
import reference as ref
from util import to_torch

N, K, H = 4, 2, 16


@pytest.fixture(scope="module")
def kernel():
    return moec.get("moe_init_routing_v2_grad", "f32", dims={"H": H}, attrs={"top_k": K}, target="cpu")


@pytest.fixture
def call(rng):
    return ref.init_routing_v2_grad_call(rng, "f32", "dropless", n=N, k=K, h=H)


def sentinel(library="numpy"):
    out = np.full((N, H), 7.5, np.float32)
    return torch.from_numpy(out) if library == "torch" else out


def expect_untouched(out):
    values = out.numpy() if isinstance(out, torch.Tensor) else out
    assert (values == 7.5).all(), "a call that failed its checks wrote its output"


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_wrong_dtype(kernel, call, library):
    grad, idx = call.inputs
    out = sentinel(library)
    convert = (lambda a: to_torch(a)) if library == "torch" else (lambda a: a)
    with pytest.raises(moec.ArgumentError, match=r"moe_init_routing_v2_grad: tensor 'grad_expanded_x': "
                                                 r"expected dtype f32, got f16"):
        kernel(convert(grad.astype(np.float16)), convert(idx), out=out)
    with pytest.raises(ValueError, match=r"tensor 'expanded_row_idx': expected dtype i32, got int64"):
        kernel(convert(grad), convert(idx.astype(np.int64)), out=out)
    with pytest.raises(ValueError, match=r"tensor 'grad_x': expected dtype f32, got f64|got float64"):
        kernel(convert(grad), convert(idx), out=convert(np.zeros((N, H))))
    expect_untouched(out)


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_non_contiguous_tensor(kernel, call, library):
    grad, idx = call.inputs
    wide = np.zeros((N * K, 2 * H), np.float32)
    wide[:, ::2] = grad
    strided = wide[:, ::2]  # the right values, every other element: a view, not a copy
    if library == "torch":
        strided = torch.from_numpy(wide)[:, ::2]
        idx = to_torch(idx)
    out = sentinel(library)
    with pytest.raises(moec.ArgumentError, match=r"tensor 'grad_expanded_x' is not contiguous"):
        kernel(strided, idx, out=out)
    expect_untouched(out)
    transposed_out = np.full((H, N), 7.5, np.float32).T
    with pytest.raises(ValueError, match=r"tensor 'grad_x' is not contiguous"):
        kernel(call.inputs[0], call.inputs[1], out=transposed_out)
    assert (transposed_out == 7.5).all()


def test_wrong_device(kernel, call):
    """A tensor that claims CUDA memory, given to a CPU kernel: refused before anything runs."""
    grad, idx = call.inputs
    out = sentinel()
    with pytest.raises(moec.ArgumentError, match=r"tensor 'grad_expanded_x' is in CUDA memory but the kernel "
                                                 r"runs on the CPU"):
        kernel(fake_dlpack.Array(grad, device_type=2), idx, out=out)
    expect_untouched(out)
    with pytest.raises(ValueError, match=r"DLPack device type 4; moec runs on the CPU \(1\) and CUDA \(2\)"):
        kernel(fake_dlpack.Array(grad, device_type=4), idx, out=out)  # OpenCL
    expect_untouched(out)


def test_another_cuda_device(kernel, call):
    """moec runs on CUDA device 0: a tensor on device 1, input or output, is refused by name, before the
    kernel's own checks (which would call it CUDA memory for a CPU kernel, as if device 0's)."""
    grad, idx = call.inputs
    out = sentinel()
    with pytest.raises(moec.ArgumentError, match=r"^moe_init_routing_v2_grad: tensor 'grad_expanded_x' is on CUDA "
                                                 r"device 1, but moec runs on CUDA device 0 \(the first of "
                                                 r"CUDA_VISIBLE_DEVICES\)") as info:
        kernel(fake_dlpack.Array(grad, device_type=2, device_id=1), idx, out=out)
    assert isinstance(info.value, ValueError)
    expect_untouched(out)
    elsewhere = fake_dlpack.Array(np.full((N, H), 7.5, np.float32), device_type=2, device_id=1)
    with pytest.raises(ValueError, match=r"tensor 'grad_x' is on CUDA device 1, but moec runs on CUDA device 0"):
        kernel(grad, idx, out=elsewhere)
    expect_untouched(elsewhere.array)


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_a_tensor_of_another_ops_shape(kernel, call, rng, library):
    """moe_unpermute's [T, E] rowmap where B2 wants its [N*K] row indices, its [R, H'] unzipped rows as B2's
    grad, and an output of the wrong token count."""
    other = ref.moe_unpermute_call(rng, "f32", weighted=False, h=8)
    xu, rowmap = other.inputs[0], other.inputs[1]
    convert = to_torch if library == "torch" else (lambda a: a)
    out = sentinel(library)
    with pytest.raises(moec.ArgumentError, match=r"tensor 'expanded_row_idx': expected 1 dims \[N \* K\], got 2 dims"):
        kernel(convert(call.inputs[0]), convert(rowmap), out=out)
    # Its unzipped rows: their count is random (a routing's padded slots), and where it happens to be B2's
    # N * K the width is the error that remains; each case is checked with the count it needs.
    rows = xu.shape[0] if xu.shape[0] != N * K else N * K + 2
    wrong_rows = np.resize(xu, (rows, xu.shape[1]))
    with pytest.raises(moec.ArgumentError, match=r"gradExpandedX must have N\*K rows when dropless"):
        kernel(convert(wrong_rows), convert(call.inputs[1]), out=out)
    expect_untouched(out)
    with pytest.raises(moec.ArgumentError, match=r"dim H: the kernel was compiled for H = 16, the tensors give 8"):
        kernel(convert(np.resize(xu, (N * K, xu.shape[1]))), convert(call.inputs[1]), out=out)
    expect_untouched(out)
    with pytest.raises(moec.ArgumentError, match=r"grad_x.*expected 4, got 6"):
        kernel(convert(call.inputs[0]), convert(call.inputs[1]), out=convert(np.full((6, H), 7.5, np.float32)))


def test_index_out_of_range(kernel, call):
    grad, idx = call.inputs
    out = sentinel()
    bad = idx.copy()
    bad[1] = N * K  # one past the rows
    with pytest.raises(moec.ArgumentError, match=r"tensor 'expanded_row_idx' element 1 is 8, outside the valid "
                                                 r"range \[0, 8\)"):
        kernel(grad, bad, out=out)
    expect_untouched(out)


def test_a_read_only_numpy_array(kernel, call):
    """numpy cannot export a read-only array through DLPack 0.6: a ValueError that says so, not a copy."""
    grad, idx = call.inputs
    grad.flags.writeable = False
    with pytest.raises(moec.ArgumentError, match=r"tensor 'grad_expanded_x' cannot be passed through DLPack: "
                                                 r".*readonly"):
        kernel(grad, idx)


def test_wrong_number_of_tensors(kernel, call):
    with pytest.raises(moec.ArgumentError, match=r"expected 2 inputs \(grad_expanded_x, expanded_row_idx\), got 1"):
        kernel(call.inputs[0])
    with pytest.raises(moec.ArgumentError, match=r"expected 1 outputs in out= \(grad_x\), got 2"):
        kernel(*call.inputs, out=[sentinel(), sentinel()])
    with pytest.raises(moec.ArgumentError, match=r"expected an array with __dlpack__"):
        kernel([1.0, 2.0], call.inputs[1])


@pytest.mark.parametrize("request_kwargs,message", [
    ({"op": "no_such_op"}, r"not a built-in op"),
    ({"dtype": "f64"}, r"unknown dtype 'f64'"),
    ({"dtype": "i32"}, r"dtype i32 is not supported \(allowed: f16, bf16, f32\)"),
    ({"dims": {}}, r"static dim 'H' needs a value"),
    ({"dims": {"H": H, "N": 4}}, r"'N' is a runtime dim"),
    ({"attrs": {"top_k": 2, "topk": 2}}, r"unknown attribute 'topk'; did you mean 'top_k'\?"),
    ({"attrs": {"topk": 2}}, r"unknown attribute 'topk'; did you mean 'top_k'\?"),
    ({"dims": {"h": H}}, r"unknown dim or attribute 'h'; did you mean 'H'\?"),
    ({"attrs": {"top_k": 2, "bogus": 1}}, r"unknown attribute 'bogus'$"),
    ({"attrs": {"top_k": 0}}, r"topK must be > 0"),
    ({"with_": ["grad_x"]}, r"'grad_x' is not an optional tensor"),
    ({"schedule": "vec=4"}, r"unknown field 'vec'"),
    ({"target": "tpu"}, r"unknown target 'tpu'"),
])
def test_bad_requests_are_value_errors(request_kwargs, message):
    kwargs = {"op": "moe_init_routing_v2_grad", "dtype": "f32", "dims": {"H": H}, "attrs": {"top_k": K},
              "target": "cpu", **request_kwargs}
    with pytest.raises(moec.ArgumentError, match=message) as info:
        moec.get(kwargs.pop("op"), **kwargs)
    assert isinstance(info.value, ValueError)


def test_a_bad_moe_file_is_a_located_value_error(tmp_path):
    op = tmp_path / "bad.moe"
    op.write_text("op bad<T: f32>\n  dim N: runtime\n  in x: T[N]\n  out y: T[N]\n{\n  y[n] = x[n] + Q\n}\n")
    with pytest.raises(moec.DslError, match=r"bad.moe:6:\d+: error: unknown name 'Q'") as info:
        moec.get(str(op), "f32", target="cpu")
    assert isinstance(info.value, ValueError)


@pytest.mark.skipif(moec.cuda_available(), reason="a CUDA device is present")
def test_no_gpu_is_a_runtime_error():
    with pytest.raises(RuntimeError, match=r"needs a GPU") as info:
        moec.get("moe_init_routing_v2_grad", "f32", dims={"H": H}, attrs={"top_k": K}, target="cuda")
    assert isinstance(info.value, moec.CompileError) and not isinstance(info.value, ValueError)


def test_cli_mirrors_report_the_commands_errors():
    with pytest.raises(moec.ArgumentError, match=r"--emit.*'bogus' is not a stage of target cpu"):
        moec.emit("moe_init_routing_v2_grad", "bogus", dims={"H": H}, attrs={"top_k": K})
    with pytest.raises(moec.ArgumentError, match=r"--dim.*'Q' is not a dim of moe_init_routing_v2_grad"):
        moec.plan("moe_init_routing_v2_grad", "f32", dims={"Q": 1})
    with pytest.raises(moec.ArgumentError, match=r"--dim.*'h' is not a dim of moe_init_routing_v2_grad; "
                                                 r"did you mean 'H'\?"):
        moec.plan("moe_init_routing_v2_grad", "f32", dims={"h": 1})
