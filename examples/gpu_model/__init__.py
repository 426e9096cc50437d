"""The Learn tutorial "The GPU you are programming": spec sheets and small models of the GPU.

No ``kernel.py`` here: this folder is not a chapter. One module per model:
:mod:`~examples.gpu_model.specs` (the spec table), :mod:`~examples.gpu_model.occupancy`,
:mod:`~examples.gpu_model.shared_memory` (bank conflicts), :mod:`~examples.gpu_model.coalescing`,
:mod:`~examples.gpu_model.waves`, :mod:`~examples.gpu_model.roofline` (the model and its plot),
:mod:`~examples.gpu_model.measured` (ceilings and points from the committed results);
:mod:`~examples.gpu_model.answers` holds the exercise answers.
"""
