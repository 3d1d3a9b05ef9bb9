"""Admission: join requests checked against the manifest and the metagraph, and the
admission challenge that makes an island's devices prove they compute."""
