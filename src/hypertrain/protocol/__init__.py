"""The protocol layer: bytes, hashes, keys and messages that cross process boundaries.

Nothing here imports torch or a web framework; every other package builds on it.
"""
