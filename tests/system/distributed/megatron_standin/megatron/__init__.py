"""Stand-in of Megatron-LM's top-level package, for hangdx's tests (see ../README.md)."""
