"""The process and its machine: thread defaults, the exit guard, the allocator, BLAS, contexts, output files."""
