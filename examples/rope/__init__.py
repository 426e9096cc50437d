"""Chapter: rotary position embeddings (RoPE), q and k rotated in one launch."""
