"""What a watching client sees: the snapshot of a research, the deltas since the last push, and the pushes that
carry them."""
