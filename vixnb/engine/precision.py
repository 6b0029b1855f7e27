"""The precision a machine trains in: bfloat16 where its GPU does it natively, float16 with a gradient scaler on
older GPUs (Colab's and Kaggle's T4, the P100), fp32 on a CPU."""
import torch

#: compute capability from which a GPU does bfloat16 natively (A100 8.0, L4 8.9, H100 9.0)
BF16_CAPABILITY = (8, 0)


def amp_dtype(capability):
    """The autocast dtype of a GPU of compute ``capability`` (a ``(major, minor)`` tuple): ``torch.bfloat16`` where it
    does bfloat16 natively (``BF16_CAPABILITY`` and up), ``torch.float16`` below (Colab's T4 7.5, Kaggle's P100 6.0
    and T4), trained with a gradient scaler; None for a CPU (``capability`` None), which trains in fp32."""
    if capability is None:
        return None
    return torch.bfloat16 if tuple(capability) >= BF16_CAPABILITY else torch.float16


def machine_precision(precision, capability=None):
    """The precision this machine trains a run of ``precision`` in: a bf16 run becomes fp16 on a GPU without native
    bfloat16 (``amp_dtype``), every other one as it is. ``capability``: the GPU's (default: the visible GPU's, or
    None where there is none). A run's precision is part of its identity: a T4's fp16 run is another run than an
    H100's bf16 one, stored beside it."""
    if capability is None and torch.cuda.is_available():
        capability = torch.cuda.get_device_capability()
    if precision == "bf16" and capability is not None and amp_dtype(capability) == torch.float16:
        return "fp16"
    return precision

