"""The Learn tutorial "Debugging": its buggy kernels, their fixes and the exercise answers.

No ``kernel.py`` here: this folder is not a chapter. The tutorial shows the
named sections of ``answers.py`` and ``tests/debugging/`` runs them.
"""
