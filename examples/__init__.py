"""The handbook's kernels: one chapter per sub-package.

Importing :mod:`academy` first sets the interpreter switch on machines without
a GPU, before any ``@triton.jit`` function below is decorated.
"""

import academy  # noqa: F401  (imported for its side effect)
