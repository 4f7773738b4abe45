"""The refinery: the merge queue that lands finished tasks through the user's check, in
batches, by compare-and-swap of the target branch; on a clone or on a bare hub."""
