"""Where and how a measurement runs: device, dtype, execution path, the caller's RNG and thread count
kept as they were, out of memory as an outcome, and the measurement's provenance."""
from __future__ import annotations

from contextlib import contextmanager, nullcontext

import torch

from ..layers import fused_attn
from ..results import provenance as made
from ..validate import COUNT, ListOf, OneOf, checked

GB = 1024**3
MB = 1024**2
PATHS = ("authors", "fused")
CPU_MEMORY_NOTE = "skipped: CUDA memory statistics need a GPU"

DTYPES = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
          "fp16": torch.float16, "float16": torch.float16}


def as_dtype(dtype):
    """A torch dtype from a name of ``DTYPES`` (or a torch dtype); None is fp32."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[str(dtype).lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}") from None


def dtype_name(dtype):
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[as_dtype(dtype)]


def resolve_device(device=None):
    return torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))


def autocast_for(device, dtype):
    """A factory of the context a forward runs in: autocast to ``dtype`` unless it is fp32."""
    device, dtype = torch.device(device), as_dtype(dtype)
    return (lambda: torch.autocast(device.type, dtype=dtype)) if dtype != torch.float32 else nullcontext


@checked(batch_size=OneOf(COUNT, ListOf(COUNT, least=1)))  # one batch size, or those of a memory record
def provenance(device, *, dtype=None, batch_size=None):
    """The provenance of a measurement (``vixnb.results.provenance``), with its dtype and batch size."""
    return made(resolve_device(device), stamp="measured", dtype=dtype_name(dtype) if dtype is not None else None,
                batch_size=batch_size)


@contextmanager
def execution_path(model, path):
    """``"authors"``: materialised softmax (and Nystrom's explicit softmax matrices); ``"fused"``: SDPA."""
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    with fused_attn(model, path == "fused"):
        yield model


@checked("seed")
@contextmanager
def local_rng(device="cpu", seed=0):
    """Random numbers seeded with ``seed`` inside (the CPU generator, and ``device``'s when it is a GPU); the
    caller's generator states are restored on exit, so measuring never reseeds or advances them."""
    device = torch.device(device)
    cuda = device.type == "cuda"
    index = (device.index if device.index is not None else torch.cuda.current_device()) if cuda else None
    with torch.random.fork_rng(devices=[index] if cuda else []):
        torch.default_generator.manual_seed(seed)
        if cuda:
            with torch.cuda.device(index):
                torch.cuda.manual_seed(seed)
        yield


@checked(threads=COUNT.or_none("the thread count as it is"))
@contextmanager
def torch_threads(threads):
    """``torch.set_num_threads(threads)`` inside (nothing when ``threads`` is None); the caller's count after."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def is_oom(err):
    """Whether ``err`` is an out-of-memory error (CUDA, or a CPU allocation that failed)."""
    if isinstance(err, torch.OutOfMemoryError):
        return True
    msg = str(err)
    return isinstance(err, RuntimeError) and ("out of memory" in msg.lower() or "can't allocate memory" in msg)


def oom_record(err):
    """The fields of a record that ran out of memory: ``status`` "oom" and the first line of the error."""
    return {"status": "oom", "error": (str(err).strip().splitlines() or [type(err).__name__])[0][:300]}


def release_memory(device):
    """Wait for ``device`` and hand its cached blocks back (CUDA; nothing on a CPU)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
