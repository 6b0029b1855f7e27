"""The engine's work per batch, on the device and with no host read: the training step (``TrainStep``: eager, or
captured once as a CUDA graph and replayed) and evaluation (``evaluate``: one host read per evaluation).

A training step writes its loss and accuracy into a device buffer (``TrainStep.records``); the epoch reads the
buffer once (``TrainStep.end_epoch``), so a GPU never waits for the host inside an epoch. The values are the ones
``loss.item()`` and the accuracy's ``.item()`` gave step by step (float32 on the device, read as Python floats),
so an epoch's sums, taken in the same order, are bitwise what they were.

``graphed=True``: full batches run through static input buffers (``static_images``, ``static_labels``). On a GPU the
first ``WARMUP_STEPS`` of them run eagerly on a side stream (they are real steps: the optimizer's moments and the
libraries' handles are made there), the next is captured (forward, loss, backward, fused AdamW with
``capturable=True``, the metric records) and replayed from then on; the learning rate lives in a device tensor
(``set_lr`` fills it), so a schedule needs no new capture. A short final batch runs eagerly. On a CPU the same
code runs eagerly, which is what the tests compare bitwise with the eager step. ``graph_blocker`` says why a run
cannot be graphed (a gradient scaler, ``torch.compile``, SGD); a step that samples per-layer gradient norms
(``after_backward``) runs eagerly between the replays, as a short final batch does.

The attention kernel is an execution choice (``ATTENTION``, ``with_attention``): none changes what a run is meant
to give, so none enters its key; ``execution`` records it with ``torch.compile`` in the result's provenance.
"""
import math
from contextlib import ExitStack

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.optim import AdamW

from ..data import normalize
from ..layers import has_both_paths

WARMUP_STEPS = 3  # eager full-batch steps before a CUDA graph captures the step


def topk_fraction(logits, labels, ks=(1, 5)):
    """The fraction of a batch whose label is among the top k logits, for each k: a (..., len(ks)) tensor for
    ``logits`` (..., batch, classes) and ``labels`` (batch,) (leading dimensions: an ensemble's members)."""
    top = logits.topk(max(ks), dim=-1).indices
    hits = top == labels[..., None]
    return torch.stack([hits[..., :k].any(dim=-1).float().mean(dim=-1) for k in ks], dim=-1)


def evaluate(model, images, labels, *, batch_size, autocast, with_loss=False):
    """Authors' metric: the mean over test batches of each batch's top-1 / top-5 accuracy (%). A ``model``
    whose logits have leading dimensions (an ensemble's (members, batch, classes)) gets one pair per member.
    ``with_loss``: triples ``(top1, top5, loss)``, loss the mean over batches of each batch's mean cross-entropy
    (the `linattn` paper's test loss), computed alike for a model and an ensemble's members. The batches' scores
    stay on the device and are read once."""
    per_batch = []
    with torch.no_grad(), autocast():
        for start in range(0, len(images), batch_size):
            logits = model(normalize(images[start:start + batch_size])).float()
            batch_labels = labels[start:start + batch_size]
            scores = topk_fraction(logits, batch_labels)
            if with_loss:
                picked = logits.log_softmax(-1).gather(-1, batch_labels.expand(logits.shape[:-1]).unsqueeze(-1))
                scores = torch.cat([scores, -picked.squeeze(-1).mean(-1, keepdim=True)], dim=-1)
            per_batch.append(scores)
    rows_of = torch.stack(per_batch, dim=-2).tolist()  # (..., batches, 2 or 3): one device sync per evaluation

    def mean(rows):
        return tuple(sum(row[i] * (100 if i < 2 else 1) for row in rows) / len(rows) for i in range(len(rows[0])))

    return mean(rows_of) if per_batch[0].dim() == 1 else [mean(rows) for rows in rows_of]


#: the attention kernels a run may be executed with: ``auto``, ``scaled_dot_product_attention`` on the kernel torch
#: picks among those enabled (every stored run's); one SDPA kernel (``math``, ``flash``, ``efficient``, ``cudnn``:
#: the last two on a CUDA GPU only); ``explicit``, the materialising path (softmax(QK^T/sqrt(d)) formed, as the
#: authors' code does: ``layers.fused_attn``) of every mixer that has both
SDPA_KERNELS = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
ATTENTION = ("auto", *SDPA_KERNELS, "explicit")


def check_attention(attention, device):
    """``attention`` (None: ``auto``) as one of ``ATTENTION``; a one-line error naming the parameter where it is
    not one, or is a GPU kernel asked for on a CPU."""
    attention = "auto" if attention is None else attention
    if attention not in ATTENTION:
        raise ValueError(f"attention={attention!r}: use one of {', '.join(ATTENTION)}")
    if attention in ("efficient", "cudnn") and torch.device(device).type != "cuda":
        raise ValueError(f"attention={attention!r} is a CUDA kernel: use auto, math, flash or explicit on a CPU")
    return attention


def with_attention(autocast, attention, model):
    """``autocast`` (a callable giving the forward's context) that also restricts ``scaled_dot_product_attention`` to
    the kernel ``attention`` names (``SDPA_KERNELS``), only around each forward (runs interleaved in one process
    each keep their own); ``autocast`` itself for ``auto`` and ``explicit`` (which sets ``model``'s mixers on their
    materialising path)."""
    if attention == "explicit":
        for module in model.modules():
            if has_both_paths(module):
                module.fused = False
    kernel = SDPA_KERNELS.get(attention)
    if kernel is None:
        return autocast

    def both():
        stack = ExitStack()
        stack.enter_context(autocast())
        stack.enter_context(sdpa_kernel(kernel))
        return stack

    return both


def graph_blocker(config, optimizer, scaler, *, compiled=False):
    """Why a run's step cannot be one CUDA graph, or None: a gradient scaler (fp16, the authors' AMP) reads the
    host to skip a step, ``torch.compile`` (``compiled``) brings its own graphs, and SGD (DualOpT's second phase,
    post-training) is not captured here. Per-layer gradient norms (``grad_norm_every``) block nothing: the steps that
    sample them run eagerly between the replays, as a short final batch does."""
    if scaler.is_enabled():
        return "a gradient scaler (fp16 or amp_loss_only)"
    if compiled:
        return "torch.compile"
    if not isinstance(optimizer, AdamW):
        return f"{type(optimizer).__name__} (only AdamW is captured)"
    return None


def set_lr(optimizer, lr):
    """Set every parameter group's learning rate to ``lr``: in place where it is a device tensor (a graphed step
    reads it there), else as a number."""
    for group in optimizer.param_groups:
        if isinstance(group["lr"], torch.Tensor):
            group["lr"].fill_(lr)
        else:
            group["lr"] = lr


def lr_at(config, epoch):
    """The learning rate of main-stage epoch ``epoch`` (1-based): ``lr``, or under ``schedule: cosine`` what
    torch's CosineAnnealingLR(T_max=epochs, eta_min=0) stepped once per epoch gives, in closed form."""
    if config.get("schedule") != "cosine":
        return config["lr"]
    return config["lr"] * 0.5 * (1 + math.cos(math.pi * (epoch - 1) / config["epochs"]))


def set_epoch_lr(optimizer, config, epoch):
    """Under a schedule, set ``optimizer``'s lr for main-stage ``epoch`` (``lr_at``) from the epoch number alone
    (no scheduler state: a resumed run is exact) and return ``{"lr": ...}`` for the history entry; else ``{}``."""
    if not config.get("schedule"):
        return {}
    lr = lr_at(config, epoch)
    set_lr(optimizer, lr)
    return {"lr": lr}


def portable_state(optimizer):
    """``optimizer.state_dict()`` with a device-tensor learning rate as a number (a checkpoint that any
    optimizer, graphed or not, loads as it would any other)."""
    state = optimizer.state_dict()
    for group in state["param_groups"]:
        if isinstance(group.get("lr"), torch.Tensor):
            group["lr"] = group["lr"].item()
    return state


class TrainStep:
    """One run's training step: forward of ``normalize(images)`` under ``autocast``, cross-entropy under
    ``loss_autocast``, backward through ``scaler``, the optimizer's step, and the step's (loss, accuracy) written to
    ``records`` on the device. ``capacity``: the most steps an epoch takes. ``graphed``: see the module's text;
    ``after_backward`` (a call's argument): work between backward and the optimizer step (eager steps only).
    ``prepare``: uint8 batch -> model input (default ``data.normalize``); ``loss_fp32``: the cross-entropy of the
    logits cast to float32 (under autocast they are bf16 or fp16, and so is the loss otherwise)."""

    def __init__(self, model, optimizer, scaler, *, capacity, autocast, loss_autocast, device, graphed=False,
                 prepare=normalize, loss_fp32=False):
        self.model, self.optimizer, self.scaler, self.prepare = model, optimizer, scaler, prepare
        self.loss_fp32 = loss_fp32
        self.autocast, self.loss_autocast, self.device = autocast, loss_autocast, torch.device(device)
        self.records = torch.zeros(capacity, 2, device=self.device)
        self.count = torch.zeros(1, dtype=torch.long, device=self.device)
        self.graphed, self.graph, self.warm, self.steps = graphed, None, 0, 0
        self.static_images = self.static_labels = None
        self.on_gpu = graphed and self.device.type == "cuda"
        self.fallback = None  # why a capture failed, after which the step runs eagerly (``provenance["execution"]``)
        if self.on_gpu:
            for group in optimizer.param_groups:  # a device tensor, filled in place by ``set_lr``
                if not isinstance(group["lr"], torch.Tensor):
                    group["lr"] = torch.tensor(float(group["lr"]), device=self.device)
                group["capturable"] = True  # the step's own state on the device: torch refuses to capture it otherwise
            self.side = torch.cuda.Stream(self.device)

    def begin_epoch(self):
        self.count.zero_()
        self.steps = 0

    def __call__(self, images, labels, *, after_backward=None):
        if not self.graphed or after_backward is not None or (
                self.static_images is not None and images.shape != self.static_images.shape):
            self._body(images, labels, after_backward)  # eager: a short final batch, a step sampling norms
        else:
            self._full_batch(images, labels)
        self.steps += 1

    def end_epoch(self):
        """The epoch's ``(loss, accuracy)`` per step, read from the device at once (the epoch's one host read)."""
        return self.records[:self.steps].tolist()

    def _body(self, images, labels, after_backward=None):
        with self.autocast():
            logits = self.model(self.prepare(images))
        with self.loss_autocast():
            loss = F.cross_entropy(logits.float() if self.loss_fp32 else logits, labels)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        if after_backward is not None:
            after_backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        accuracy = (logits.argmax(dim=1) == labels).float().mean()
        self.records.index_copy_(0, self.count, torch.stack([loss.detach().float(), accuracy])[None])
        self.count.add_(1)

    def _full_batch(self, images, labels):
        if self.static_images is None:
            self.static_images, self.static_labels = torch.empty_like(images), torch.empty_like(labels)
        if self.on_gpu and self.warm < WARMUP_STEPS:  # real steps, on a side stream as capture requires
            self.side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(self.side):
                self._body(images, labels)
            torch.cuda.current_stream(self.device).wait_stream(self.side)
            self.warm += 1
            return
        self.static_images.copy_(images)
        self.static_labels.copy_(labels)
        if not self.on_gpu:  # the graphed path run eagerly (a CPU): the same body through the same buffers
            self._body(self.static_images, self.static_labels)
            return
        if self.graph is None:
            graph = torch.cuda.CUDAGraph()
            self.optimizer.zero_grad(set_to_none=True)  # the captured backward allocates the gradients it replays
            try:
                with torch.cuda.graph(graph):
                    self._body(self.static_images, self.static_labels)
            except RuntimeError as e:  # nothing ran during the failed capture: this step and the rest run eagerly
                self.fallback = (f"capture failed, eager from epoch step {self.steps + 1}: "
                                 f"{str(e).splitlines()[0][:200]}")
                self.graphed = self.on_gpu = False
                torch.cuda.synchronize(self.device)
                self._body(self.static_images, self.static_labels)
                return
            self.graph = graph
        self.graph.replay()


def layer_grad_norms(layers):
    """(layers,) tensor on the device: for each layer (a list of parameters), the L2 norm of all its gradients
    together (no device sync)."""
    norms = []
    for params in layers:
        grads = [p.grad for p in params if p.grad is not None]
        norms.append(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))) if grads
                     else params[0].new_zeros(()))
    return torch.stack(norms)


def drain(run):
    """Run a generator (``_run``, ``_epoch_steps``) to its end; its return value."""
    while True:
        try:
            next(run)
        except StopIteration as done:
            return done.value


def execution(device, graphed_phases, concurrent_runs, fallbacks=(), *, compiled=False, attention="auto"):
    """How a run was executed, which changes no number it is meant to give beyond rounding
    (``provenance["execution"]``): the optimizers whose steps ran as CUDA graphs, runs sharing the process (their GPU
    memory figures are the process's), torch.compile, the attention path (``ATTENTION``) and, on a GPU, the SDPA
    kernels torch may pick."""
    out = {"cuda_graphs": sorted(graphed_phases) if device.type == "cuda" else [], "concurrent_runs": concurrent_runs,
           "compile": bool(compiled), "attention": attention,
           **({"cuda_graph_fallbacks": list(fallbacks)} if fallbacks else {})}
    if device.type == "cuda" and attention == "auto":
        b = torch.backends.cuda
        out["sdpa_backends"] = [name for name, on in (("flash", b.flash_sdp_enabled()),
                                                      ("cudnn", b.cudnn_sdp_enabled()),
                                                      ("mem_efficient", b.mem_efficient_sdp_enabled()),
                                                      ("math", b.math_sdp_enabled())) if on]
    return out
