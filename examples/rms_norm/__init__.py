"""Chapter: RMS norm, forward and backward with dW, no locks."""
