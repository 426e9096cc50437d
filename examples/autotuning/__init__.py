"""The Learn tutorial "Meta-parameters and autotuning": the matmul with its tile shape searched, and the answers.

No ``kernel.py`` here: this folder is not a chapter (the kernel it tunes is
the ``tiled_matmul`` chapter's). ``autotune.py`` is the autotuned matmul;
``answers.py`` holds the exercise answers.
"""
