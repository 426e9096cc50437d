"""The Learn tutorial "Your first kernel, run on a CPU": the exercise answers.

No ``kernel.py`` here: this folder is not a chapter. The tutorial shows the
named sections of ``answers.py`` and ``tests/first_kernel/`` runs them.
"""
