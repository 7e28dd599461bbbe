"""The one loop that writes all of a buffer to a descriptor, shared by every layer.

It imports nothing of attest (nor ``typing``): the cached ``attest --help`` writes through it.

    >>> write_all(1, b"hello\\n")
"""

import os


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write less than it is given).

    Raises:
        OSError: the write fails.
    """
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


__all__ = ["write_all"]
