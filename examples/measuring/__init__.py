"""The Learn tutorial "Measuring honestly": a simulated GPU, the exercise answers, and the PTX/SASS reader.

No ``kernel.py`` here: this folder is not a chapter. ``answers.py`` holds the
simulated GPU and the exercise answers; ``asm.py`` compiles a chapter kernel
and writes what it compiled to into ``examples/<slug>/asm/``.
"""
