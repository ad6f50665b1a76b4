"""The public ops, one small module per family; each is a thin call into a C++ Trace op."""
