"""Build hook for the optional C accelerator of the Merkle tree (the rest is in pyproject.toml).

The extension is optional: where no compiler or OpenSSL headers are available the build
skips it and hypertrain.protocol.merkle uses its pure-Python path (same bytes, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "hypertrain.protocol._merkle_c",
            ["src/hypertrain/protocol/_merkle_c.c"],
            libraries=["crypto"],
            optional=True,
        )
    ]
)
