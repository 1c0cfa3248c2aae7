# lit configuration for moec's IR and CLI tests: each .mlir / .moe / .test file runs its RUN lines.
import os
import shutil

import lit.formats

config.name = "moec"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".moe", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.moec_binary_dir, "tests", "lit")

config.environment["PATH"] = os.pathsep.join(
    [config.moec_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(("%moec_src", config.moec_source_dir))
config.substitutions.append(("%moec_bin", config.moec_tools_dir))

# Tests that make device nodes (mknod) need root.
if hasattr(os, "geteuid") and os.geteuid() == 0:
    config.available_features.add("root")

# PTX assembly checks need ptxas; without it they are reported UNSUPPORTED (lit prints the reason).
if config.ptxas and os.path.exists(config.ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", config.ptxas))
