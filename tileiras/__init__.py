"""tileiras: a readable Python re-implementation of NVIDIA's Tile IR compiler."""

__version__ = "0.1.0"
