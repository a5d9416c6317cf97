"""NVML through nvidia-ml-py (the optional `[gpu]` extra), imported lazily: None when
the package or the driver library is missing, so callers fall back to nvidia-smi text."""


def nvml():
    """The initialised pynvml module, or None (package not installed, no NVIDIA driver)."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    return pynvml


def driver_version() -> str | None:
    n = nvml()
    if n is None:
        return None
    v = n.nvmlSystemGetDriverVersion()
    return v.decode() if isinstance(v, bytes) else v
