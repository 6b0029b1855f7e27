"""Every registered model on a fake CUDA device (torch's ``FakeTensorMode``): built under ``torch.device("cuda")``
and run forward with the engine's batch pipeline (the blog's flips and rotations on the device, normalisation, the
cross-entropy loss). A tensor that a model makes on the CPU while its inputs are on the GPU
(``torch.arange`` without ``device=``, a mask built in ``forward``) fails here, on a machine without a GPU, instead
of in the first minute of a lent one.

What this cannot catch: the backward pass and the optimizer step need a real CUDA context (fake tensors have no autograd
kernels for every op here), numerical problems (fake tensors hold no values), autocast (torch disables it where CUDA is
not available), RandAugment (torchvision draws its operation from a tensor's value: data-dependent, refused in fake
mode), CUDA kernels' own limits (memory, flash attention's head sizes) and anything that reads a tensor's values in
``forward``. The five CCT models draw their initial weights with ``trunc_normal_``, which needs real numbers: they are
built on the CPU and moved to the fake device, so only their forward is checked for device mix-ups."""
import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

import vixnb
from vixnb.engine.augment import flip_rotate
from vixnb.data import normalize

BUILT_ON_CPU = {"cct", "cct_6_4", "ccl", "ccn", "ccp"}  # trunc_normal_ needs real scalars


@pytest.mark.parametrize("name", vixnb.list_models())
def test_every_model_runs_forward_on_a_fake_cuda_device(name):
    with torch.random.fork_rng():
        torch.manual_seed(0)
        on_cpu = vixnb.create_model(name) if name in BUILT_ON_CPU else None
    with FakeTensorMode(allow_non_fake_inputs=on_cpu is not None):
        if on_cpu is None:
            with torch.device("cuda"):
                model = vixnb.create_model(name)
        else:
            model = on_cpu.to("cuda")
        assert {p.device.type for p in model.parameters()} == {"cuda"}
        size = model.default_cfg["input_size"][1:]
        batch = torch.randint(0, 256, (2, 3, *size), dtype=torch.uint8, device="cuda")
        batch = flip_rotate(batch, hflip=True, vflip=True, rotate=15, generator=None)
        logits = model(normalize(batch))
        loss = F.cross_entropy(logits.float(), torch.zeros(2, dtype=torch.long, device="cuda"))
        assert logits.device.type == "cuda" and loss.device.type == "cuda"
        assert logits.shape == (2, 10)  # CIFAR-10, the models' default data set
