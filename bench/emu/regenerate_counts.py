"""calibrate.py --regenerate COMMIT: the emulator's counts for the kernels a GPU run measured at COMMIT.

The kernels, their launch geometry (that commit's bundle format) and their inputs (its cases) must be those
the GPU ran; the counts must be today's emulator's. So, in a scratch worktree of COMMIT:
  1. its own moec (a normal build, target moec) and its own bench/gpu/prepare.sh: the bundle measured;
  2. today's emulator (runtime/ptxemu and its headers) copied over the tree's, with a header shim where the
     tree predates what today's emulator includes, and bench/emu/estimate.cpp added to its bench/gpu;
  3. a runtime-only build of that tree (no LLVM), whose moec-emu-estimate runs every entry of the bundle,
     one process per core, into the counts file, a line per cell in the bundle's order.
Kernels that share a workspace run every block at production size: about an hour of CPU for the 72 entries.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

CONTRACTS_SHIM = """#pragma once
// calibrate.py --regenerate: today's emulator in a tree from before moec/contracts.
#include <cstdint>
namespace moec {
constexpr int64_t kWarpSize = 32;
}
"""

ESTIMATE_TARGET = """
# calibrate.py --regenerate
add_executable(moec-emu-estimate estimate.cpp)
target_link_libraries(moec-emu-estimate PRIVATE moec_runtime)
"""


def sh(cmd, cwd, log):
    print("+", " ".join(cmd), file=sys.stderr)
    # ccache then sees paths relative to the build folder: a tree anywhere hits what any earlier build stored.
    env = dict(os.environ, CCACHE_BASEDIR="/")
    with open(log, "a") as out:
        if subprocess.call(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env) != 0:
            sys.exit(f"calibrate.py --regenerate: '{' '.join(cmd)}' failed (log: {log})")


def overlay_emulator(root, tree):
    for folder in ("runtime/ptxemu", "include/moec/runtime/ptxemu"):
        for name in os.listdir(os.path.join(root, folder)):
            shutil.copy(os.path.join(root, folder, name), os.path.join(tree, folder, name))
    shim = os.path.join(tree, "include/moec/contracts/Schedule.h")
    if not os.path.exists(shim):
        os.makedirs(os.path.dirname(shim), exist_ok=True)
        open(shim, "w").write(CONTRACTS_SHIM)
    cmake = os.path.join(tree, "runtime/ptxemu/CMakeLists.txt")
    text = open(cmake).read()
    if "MOEC_PUBLIC_INCLUDE" not in open(os.path.join(tree, "CMakeLists.txt")).read():
        text = text.replace("${MOEC_PUBLIC_INCLUDE}", "${MOEC_INCLUDE}")
    open(cmake, "w").write(text)
    gpu = os.path.join(tree, "bench/gpu")
    shutil.copy(os.path.join(root, "bench/emu/estimate.cpp"), os.path.join(gpu, "estimate.cpp"))
    if "moec-emu-estimate" not in open(os.path.join(gpu, "CMakeLists.txt")).read():
        open(os.path.join(gpu, "CMakeLists.txt"), "a").write(ESTIMATE_TARGET)


def run(root, commit, counts_path, first=0, count=None):
    scratch = tempfile.mkdtemp(prefix=f"moec-calibrate-{commit}-")
    tree, log = os.path.join(scratch, "tree"), os.path.join(scratch, "log.txt")
    print(f"calibrate.py --regenerate: working in {scratch}", file=sys.stderr)
    sh(["git", "worktree", "add", "--detach", tree, commit], root, log)
    try:
        compilers = ["-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CXX_COMPILER=clang++-22", "-DCMAKE_C_COMPILER=clang-22",
                     "-G", "Ninja"]
        sh(["cmake", "-S", ".", "-B", "build"] + compilers, tree, log)
        sh(["cmake", "--build", "build", "--target", "moec"], tree, log)
        sh(["bash", "bench/gpu/prepare.sh"], tree, log)
        overlay_emulator(root, tree)
        runtime = os.path.join(scratch, "runtime-build")
        sh(["cmake", "-S", ".", "-B", runtime, "-DMOEC_RUNTIME_ONLY=ON", "-DMOEC_PTXAS=/usr/local/cuda/bin/ptxas"]
           + compilers, tree, log)
        sh(["cmake", "--build", runtime, "--target", "moec-emu-estimate"], tree, log)
        bundle = os.path.join(tree, "bench/gpu/bundle")
        entries = len(json.load(open(os.path.join(bundle, "bundle.json")))["entries"])
        chosen = range(first, entries if count is None else min(entries, first + count))
        binary = os.path.join(runtime, "bin/moec-emu-estimate")

        def one(index):
            out = subprocess.run([binary, bundle, str(index), "1"], capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"calibrate.py --regenerate: entry {index}: {out.stderr.strip()}")
            print(f"  entry {index} of {entries} counted", file=sys.stderr)
            return out.stdout
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            outputs = list(pool.map(one, chosen))
        os.makedirs(os.path.dirname(counts_path), exist_ok=True)
        with open(counts_path, "w") as out:
            out.write("".join(outputs))
    finally:
        subprocess.call(["git", "worktree", "remove", "--force", tree], cwd=root)
    print(f"calibrate.py --regenerate: {counts_path} written; scratch {scratch} left for its logs", file=sys.stderr)
