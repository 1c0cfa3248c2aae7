"""8 Python threads at once: calling one kernel, and asking for new kernels (some the same), from numpy and
torch. The GIL is released while kernels compile and run, so this also runs them concurrently."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

import moec
import reference as ref
from util import assert_bits_equal, to_numpy, to_torch

THREADS = 8


def test_eight_threads_share_a_kernel_and_compile_new_ones():
    shared = moec.get("moe_init_routing_v2_grad", "f32", dims={"H": 16}, attrs={"top_k": 2}, target="cpu")

    def work(worker: int):
        rng = np.random.default_rng(1000 + worker)
        for i in range(6):
            call = ref.init_routing_v2_grad_call(rng, "f32", "dropless", n=3 + worker + i)
            use_torch = (worker + i) % 2 == 1
            inputs = [to_torch(x) for x in call.inputs] if use_torch else call.inputs
            got = shared(*inputs)
            assert_bits_equal(to_numpy(got) if use_torch else got, call.expected[0], f"worker {worker} call {i}")
        # A new specialization per pair of workers: two threads ask for each at the same time.
        h = 8 * (1 + worker // 2)
        call = ref.unpermute_grad_call(rng, "f32", pad=False, with_probs=True, h=h)
        kernel = moec.get(call.op, "f32", dims=call.dims, attrs=call.attrs, with_=call.with_, target="cpu")
        for got, expected in zip(kernel(*call.inputs), call.expected):
            assert_bits_equal(got, expected, f"worker {worker} H={h}")
        return worker

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        assert sorted(pool.map(work, range(THREADS))) == list(range(THREADS))


def test_torch_tensors_from_many_threads_keep_their_types():
    kernel = moec.get("moe_unpermute", "bf16", dims={"H": 16, "E": 4, "K": 2}, attrs={"using_weighted_combine": 1},
                      target="cpu")

    def work(worker: int):
        rng = np.random.default_rng(2000 + worker)
        call = ref.moe_unpermute_call(rng, "bf16", weighted=True)
        hidden, topk = kernel(*[to_torch(x, "bf16") for x in call.inputs])
        assert hidden.dtype == torch.bfloat16 and topk.dtype == torch.float32
        assert_bits_equal(to_numpy(hidden), call.expected[0])
        assert_bits_equal(to_numpy(topk), call.expected[1])

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        list(pool.map(work, range(THREADS * 2)))


def test_the_gil_is_released_while_compiling_and_running():
    """With a switch interval of minutes the interpreter does not take the GIL from a thread that holds it: the
    main thread runs while the worker is inside moec only if moec lets the GIL go."""
    import sys
    import threading
    import time

    rng = np.random.default_rng(3000)
    big = ref.init_routing_v2_grad_call(rng, "f32", "dropless", n=2048, k=4, h=512)
    state = {"inside": False, "done": False, "seen": 0}

    def compile_and_run():
        state["inside"] = True
        kernel = moec.get(big.op, "f32", dims=big.dims, attrs={**big.attrs, "top_k": 4}, target="cpu",
                          schedule="vector=4,threads=1,rows=1,unroll=3")  # a specialization no other test makes
        for _ in range(20):
            kernel(*big.inputs)
        state["done"] = True

    interval = sys.getswitchinterval()
    sys.setswitchinterval(300)
    try:
        worker = threading.Thread(target=compile_and_run)
        worker.start()
        while worker.is_alive():
            if state["inside"] and not state["done"]:
                state["seen"] += 1
            time.sleep(0.001)  # lets the GIL go, so that the worker gets it back when moec asks for it
        worker.join()
    finally:
        sys.setswitchinterval(interval)
    assert state["seen"] > 0, "the main thread never ran while the other was compiling or launching"
