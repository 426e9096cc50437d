"""What the LayerNorm and RMSNorm chapters share.

No ``kernel.py`` here: this folder is not a chapter. ``launch.py`` holds the
input checks, launch rules and the second stage of the weight-gradient
reduction both norms use; ``bench.py`` the benchmark cases both chapters
time, so that their tables line up.
"""
