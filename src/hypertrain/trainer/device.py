"""The torch device a command was told to use, checked before any work starts.

``--device cuda`` on a CPU build of torch, ``cuda:3`` on a one-GPU machine or a
misspelt name end the command with one line that says what to pass instead, rather
than with a traceback from deep inside the first tensor operation.
"""

from __future__ import annotations

import torch

from hypertrain.trainer.errors import TrainerError


class DeviceError(TrainerError):
    """The requested device does not exist on this machine or in this torch build."""


def require_device(text: str, *, flag: str = "--device") -> torch.device:
    """``text`` as a usable :class:`torch.device`, or :class:`DeviceError` (one line)."""
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise DeviceError(
            f"{flag} {text!r} is not a torch device: use cpu, cuda or cuda:N"
        ) from None
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise DeviceError(f"{flag} {text}: only cpu and cuda devices are supported")
    if not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else "a CUDA build"
        raise DeviceError(
            f"{flag} {text}: no CUDA device is usable here (torch {torch.__version__}, {build}):"
            " use --device cpu, or install a CUDA build of torch on a machine with a GPU"
        )
    count = torch.cuda.device_count()
    if device.index is not None and device.index >= count:
        raise DeviceError(
            f"{flag} {text}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}"
        )
    return device
