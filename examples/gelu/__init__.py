"""Chapter: GeLU, a case study in fusion (the Learn tutorial "Fusion: GeLU")."""
