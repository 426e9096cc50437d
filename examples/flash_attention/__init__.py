"""Attention: naive, FlashAttention-2 forward (online softmax, causal split, TMA) and its backward."""
