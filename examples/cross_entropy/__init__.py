"""Chapter: cross entropy, the loss read once and its gradient written once."""
