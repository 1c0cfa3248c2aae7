# lit configuration for moec's IR and CLI tests: each .mlir / .moe / .test file runs its RUN lines.
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
from moec_litformat import ShTestWithOwnCache  # noqa: E402  (each test gets its own empty cache)

config.name = "moec"
config.test_format = ShTestWithOwnCache(execute_external=False)
config.suffixes = [".mlir", ".moe", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py", "moec_litformat.py", "__pycache__"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.moec_binary_dir, "tests", "lit")

config.environment["PATH"] = os.pathsep.join(
    [config.moec_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
# Nothing reaches the user's cache: HOME and XDG_CACHE_HOME point into the build tree, emptied per run.
scratch_home = os.path.join(config.test_exec_root, "home")
shutil.rmtree(scratch_home, ignore_errors=True)
os.makedirs(scratch_home, exist_ok=True)
config.environment["HOME"] = scratch_home
config.environment["XDG_CACHE_HOME"] = os.path.join(scratch_home, ".cache")

config.substitutions.append(("%moec_src", config.moec_source_dir))
config.substitutions.append(("%moec_bin", config.moec_tools_dir))

# Tests that make device nodes (mknod) need root.
if hasattr(os, "geteuid") and os.geteuid() == 0:
    config.available_features.add("root")

# PTX assembly checks need ptxas; without it they are reported UNSUPPORTED (lit prints the reason).
if config.ptxas and os.path.exists(config.ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", config.ptxas))

# The CPU pattern probe's `arithmetic` mode runs AVX512-BF16 code (bench/cpu/A3PatternProbe.cpp).
try:
    with open("/proc/cpuinfo") as cpuinfo:
        cpu_flags = set(next((line for line in cpuinfo if line.startswith("flags")), "").split())
except OSError:
    cpu_flags = set()
if {"avx512_bf16", "avx512bw", "avx512dq"} <= cpu_flags:
    config.available_features.add("avx512bf16")

# moec tune's plots are checked as a user sees them: its gnuplot script rendered to PNG and read back by
# python (zlib alone). Without gnuplot those tests are UNSUPPORTED, and lit says why.
config.substitutions.append(("%python", sys.executable))
if shutil.which("gnuplot"):
    config.available_features.add("gnuplot")
else:
    lit_config.note("gnuplot is not installed (scripts/setup.sh installs gnuplot-nox): the tests that render "
                    "moec tune's plot (REQUIRES: gnuplot) are UNSUPPORTED")
