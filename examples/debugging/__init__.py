"""Answers to the exercises of the Learn-track tutorials that have no chapter of their own.

No ``kernel.py`` here: this folder is not a chapter. The tutorials display the
named sections with ``academy.notebook.answer`` and ``tests/`` runs them.
"""
