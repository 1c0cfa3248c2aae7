"""The lit test format of moec's tests (a module of its own, so that lit's worker processes can unpickle it)."""
import os
import shutil

import lit.formats
import lit.TestRunner


class ShTestWithOwnCache(lit.formats.ShTest):
    """Runs each test with MOEC_CACHE_DIR set to its own cache, %t.cache (a test may look inside it),
    created empty: no test sees another's kernels or the user's."""

    def execute(self, test, litConfig):
        _, tmpBase = lit.TestRunner.getTempPaths(test)
        cache = tmpBase + ".cache"
        shutil.rmtree(cache, ignore_errors=True)
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        # A worker runs one test at a time, on its own copy of the config: setting it here is per test.
        test.config.environment["MOEC_CACHE_DIR"] = cache
        return super().execute(test, litConfig)
