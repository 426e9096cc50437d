"""The Learn tutorial "Why Triton": the exercise answers.

No ``kernel.py`` here: this folder is not a chapter. The tutorial shows the
named sections of ``answers.py`` and ``tests/why_triton/`` runs them.
"""
