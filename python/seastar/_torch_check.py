"""The check that seastar's extension fits the torch of this process, made before it loads.

A C++ extension is compiled against one torch's headers and libraries; loaded into another
torch it fails with an undefined symbol, or misbehaves later. The build records its torch in
the generated ``_version.py`` (cmake/SeastarVersion.cmake), compared here with the torch that
is imported.
"""
from __future__ import annotations


def check_torch(runtime_version: str) -> str:
    """Returns seastar's version; raises ImportError naming both torch versions when they differ."""
    try:
        from . import _version
    except ImportError:
        raise ImportError(
            "seastar is not built: seastar/_version.py, which the CMake build writes beside the "
            "extension, is missing. In a checkout run `bash scripts/setup.sh`; otherwise install "
            "with `pip install --no-build-isolation .`") from None
    if _version.torch_version != runtime_version:
        raise ImportError(
            f"seastar {_version.version} was built against torch {_version.torch_version}, but "
            f"torch {runtime_version} is installed; its C++ extension only loads into the torch "
            f"it was compiled against. Rebuild seastar with this torch (`pip install "
            f"--no-build-isolation --force-reinstall .`, or `bash scripts/setup.sh` in a "
            f"checkout), or install torch {_version.torch_version}.")
    return _version.version
