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
from contextlib import ExitStack

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.optim import AdamW

from ..data import normalize
from ..layers import has_both_paths
from .augment import apply_flip_rotate, augment_batch, flip_rotate_draws

WARMUP_STEPS = 3  # eager full-batch steps before a CUDA graph captures the step


def topk_fraction(logits, labels, ks=(1, 5)):
    """The fraction of a batch whose label is among the top k logits, for each k: a (..., len(ks)) tensor for
    ``logits`` (..., batch, classes) and ``labels`` (batch,) (leading dimensions: an ensemble's members)."""
    top = logits.topk(max(ks), dim=-1).indices
    hits = top == labels[..., None]
    return torch.stack([hits[..., :k].any(dim=-1).float().mean(dim=-1) for k in ks], dim=-1)


def batch_scores(model, images, labels, with_loss=False):
    """One batch's (top-1, top-5) fractions (and, ``with_loss``, its mean cross-entropy) on the device: a (..., 2 or 3)
    tensor (leading dimensions: an ensemble's members)."""
    logits = model(normalize(images)).float()
    scores = topk_fraction(logits, labels)
    if with_loss:
        picked = logits.log_softmax(-1).gather(-1, labels.expand(logits.shape[:-1]).unsqueeze(-1))
        scores = torch.cat([scores, -picked.squeeze(-1).mean(-1, keepdim=True)], dim=-1)
    return scores


def evaluate(model, images, labels, *, batch_size, autocast, with_loss=False):
    """Authors' metric: the mean over test batches of each batch's top-1 / top-5 accuracy (%). A ``model``
    whose logits have leading dimensions (an ensemble's (members, batch, classes)) gets one pair per member.
    ``with_loss``: triples ``(top1, top5, loss)``, loss the mean over batches of each batch's mean cross-entropy
    (the `linattn` paper's test loss), computed alike for a model and an ensemble's members. The batches' scores
    stay on the device and are read once (``Evaluation``: a run's evaluations, graphed on a GPU)."""
    with torch.no_grad(), autocast():
        per_batch = [batch_scores(model, images[start:start + batch_size], labels[start:start + batch_size], with_loss)
                     for start in range(0, len(images), batch_size)]
    return _means(per_batch)


def _means(per_batch):
    """The authors' metric of each batch's scores (``batch_scores``): the mean over batches, in %, read at once."""
    rows_of = torch.stack(per_batch, dim=-2).tolist()  # (..., batches, 2 or 3): one device sync per evaluation

    def mean(rows):
        return tuple(sum(row[i] * (100 if i < 2 else 1) for row in rows) / len(rows) for i in range(len(rows[0])))

    return mean(rows_of) if per_batch[0].dim() == 1 else [mean(rows) for rows in rows_of]


class Evaluation:
    """A run's evaluation of one split (``evaluate``'s metric), made again every epoch (``evaluation()``).
    ``graphed=True``: on a GPU, from the second evaluation on, the forward of a full batch and its scores are one CUDA
    graph, replayed batch after batch (the batch taken from a device index, the scores written into a device buffer);
    a short last batch runs eagerly. A capture that fails leaves it eager (``fallback`` says why). On a CPU the same
    scores come from the eager loop."""

    def __init__(self, model, images, labels, *, batch_size, autocast, with_loss=False, graphed=False):
        self.model, self.images, self.labels, self.bs = model, images, labels, batch_size
        self.autocast, self.with_loss = autocast, with_loss
        self.full = len(images) // batch_size
        self.graphed = graphed and images.is_cuda and self.full > 0
        self.graph = self.buffer = None
        self.calls, self.fallback = 0, None

    def __call__(self):
        self.calls += 1
        if not (self.graphed and self.calls > 1):
            return evaluate(self.model, self.images, self.labels, batch_size=self.bs, autocast=self.autocast,
                            with_loss=self.with_loss)
        with torch.no_grad(), self.autocast():
            per_batch = self._replayed()
            for start in range(len(per_batch) * self.bs, len(self.images), self.bs):
                per_batch.append(batch_scores(self.model, self.images[start:start + self.bs],
                                              self.labels[start:start + self.bs], self.with_loss))
        return _means(per_batch)

    def _replayed(self):
        """The full batches' scores, from the captured graph (captured at the first call here)."""
        if self.graph is None:
            positions = torch.arange(self.bs, device=self.images.device)
            first = batch_scores(self.model, self.images[:self.bs], self.labels[:self.bs], self.with_loss)
            self.buffer = first.new_empty(self.full, *first.shape)
            self.index = torch.zeros(1, dtype=torch.long, device=self.images.device)
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    rows = self.index * self.bs + positions
                    scores = batch_scores(self.model, self.images.index_select(0, rows),
                                          self.labels.index_select(0, rows), self.with_loss)
                    self.buffer.index_copy_(0, self.index, scores[None])
                    self.index.add_(1)
            except RuntimeError as e:  # nothing ran during the failed capture: eager from now on
                self.fallback = f"evaluation capture failed: {str(e).splitlines()[0][:200]}"
                self.graphed = False
                torch.cuda.synchronize(self.images.device)
                return []
            self.graph = graph
        self.index.zero_()
        for _ in range(self.full):
            self.graph.replay()
        return list(self.buffer)


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
    host to skip a step, ``torch.compile`` (``compiled``) brings its own graphs, RandAugment (torchvision draws each
    image's operations on the host) and SGD (DualOpT's second phase, post-training) are not captured here. Per-layer
    gradient norms (``grad_norm_every``), the blog's flips and rotations, a warm-up and clipping block nothing: they
    are inside the graph."""
    if scaler.is_enabled():
        return "a gradient scaler (fp16 or amp_loss_only)"
    if compiled:
        return "torch.compile"
    if config.get("randaugment"):
        return "RandAugment (drawn on the host)"
    if not (isinstance(optimizer, AdamW) or getattr(optimizer, "capturable", False)):
        return f"{type(optimizer).__name__} (only AdamW is captured)"
    return None


class Step:
    """What every training step shares (a run's, ``TrainStep``; an ensemble's, ``ensemble.EnsembleStep``): it takes its
    own batch, the whole step runs on the device with no host read, and on a GPU it is one CUDA graph.

    An epoch starts with ``begin_epoch(order)`` (each member's data order: (images,) for a run, (members, images) for an
    ensemble); each call takes the next batch of that order from a device offset (``batch``: gathered, RandAugmented
    or flipped and rotated from each member's own generator), trains on it and writes its (loss, accuracy) into
    ``records``; ``end_epoch`` reads the epoch's records at once. ``layers`` (each layer's parameters, for
    ``grad_norm_every``): each step computes the per-layer gradient norms between backward and the optimizer and adds
    them to a device sum where the step is sampled (every ``grad_norm_every``-th of the epoch: a flag on the device),
    read with the records (``epoch_norms``).

    ``graphed=True``: full batches replay one CUDA graph of the whole step (gather, augmentation, forward, loss,
    backward, gradient norms, clipping, optimizer, records); its first ``WARMUP_STEPS`` full batches run eagerly on a
    side stream (real steps: the optimizer's state and the libraries' handles are made there), the next is captured
    and every later one replayed. A short final batch runs eagerly. A capture that fails leaves the step eager, and
    ``fallback`` says why (``provenance["execution"]``). On a CPU the same code runs eagerly: what the tests compare
    with the eager step. Subclasses give ``_train(images, labels, sample)`` (``sample``: whether the norms are taken;
    ``"device"`` inside a graph, where the device flag decides) and ``record_shape``."""

    record_shape = ()  # one (loss, accuracy) pair per step: () for a run, (members,) for an ensemble

    def __init__(self, images, labels, *, batch_size, device, graphed=False, augment=None, randaugment=None,
                 augmenters=(), layers=None, grad_norm_every=0):
        self.images, self.labels, self.bs, self.device = images, labels, batch_size, torch.device(device)
        self.augment, self.randaugment, self.augmenters = augment, randaugment, list(augmenters)
        self.layers, self.every = layers, grad_norm_every
        capacity = -(-len(images) // batch_size)
        self.records = torch.zeros(capacity, 2, *self.record_shape, device=self.device)  # the default float type
        self.count = torch.zeros(1, dtype=torch.long, device=self.device)
        self.offset = torch.zeros(1, dtype=torch.long, device=self.device)
        self.positions = torch.arange(batch_size, device=self.device)
        self.norm_sum = self.order = None
        self.graphed, self.graph, self.warm, self.steps, self.position, self.sampled = graphed, None, 0, 0, 0, 0
        self.on_gpu = graphed and self.device.type == "cuda"
        self.fallback = None  # why a capture failed, after which the step runs eagerly (``provenance["execution"]``)
        if self.on_gpu:
            self.side = torch.cuda.Stream(self.device)

    def begin_epoch(self, order):
        """Start an epoch over ``order`` (each member's permutation of the training images, on the device), copied
        into the step's own buffer (a captured graph reads that one)."""
        if self.order is None:
            self.order = torch.empty_like(order)
            if self.layers is not None:
                self.norm_sum = torch.zeros(*self._norm_shape(), device=self.device)
        self.order.copy_(order)
        self.count.zero_()
        self.offset.zero_()
        if self.norm_sum is not None:
            self.norm_sum.zero_()
        self.steps = self.position = self.sampled = 0

    def __call__(self):
        """One optimizer step on the next batch of the epoch's order."""
        size = min(self.bs, len(self.images) - self.position)
        sample = self.layers is not None and self.steps % self.every == 0
        if not self.graphed or size != self.bs:
            self._step(size, sample)  # eager: a short final batch, or a step that is not graphed
        else:
            self.full_batch(sample)
        self.sampled += sample
        self.steps += 1
        self.position += size

    def batch(self, size):
        """The next ``size`` images (uint8) and labels of each member's order, from the device offset (a run:
        (size, C, H, W); an ensemble: (members, size, C, H, W)), augmented as the run's config says."""
        index = self.order.index_select(-1, self.offset + self.positions[:size])
        self.offset.add_(size)
        images, labels = self.images[index], self.labels[index]
        if self.randaugment:
            images = augment_batch(images, self.randaugment)
        if self.augment:  # each member's draws from its own generator, applied to every image at once
            draws = [flip_rotate_draws(size, g, images.device) for g in self.augmenters]
            images = apply_flip_rotate(images, torch.stack(draws, 1) if self.record_shape else draws[0], **self.augment)
        return images, labels

    def end_epoch(self):
        """The epoch's ``(loss, accuracy)`` per step, read from the device at once (the epoch's one host read): a
        run's ``[(loss, accuracy), ...]``; an ensemble's ``[[(loss, accuracy) of each member], ...]``."""
        rows = self.records[:self.steps]
        return rows.tolist() if not self.record_shape else rows.transpose(1, 2).tolist()

    def epoch_norms(self):
        """The mean per-layer gradient norm of the epoch's sampled steps (a run: (layers,); an ensemble: (members,
        layers)), as a device tensor, or None where none is taken."""
        return None if self.layers is None or not self.sampled else self.norm_sum / self.sampled

    def _norm_shape(self):
        return (len(self.layers),)

    def add_norms(self, norms, sample):
        """Add ``norms`` to the epoch's sum where the step is sampled: ``sample`` True, or ``"device"`` (inside a
        graph: sampled where the step's index within the epoch, on the device, is a multiple of ``every``)."""
        if sample == "device":
            norms = torch.where(self.count % self.every == 0, norms, torch.zeros_like(norms))
        self.norm_sum.add_(norms)

    def _step(self, size, sample):
        images, labels = self.batch(size)
        self._train(images, labels, sample)

    def full_batch(self, sample):
        """A full batch's step: a warm-up step, the capture of the graph, or its replay (on a CPU: eagerly)."""
        if self.on_gpu and self.warm < WARMUP_STEPS:  # real steps, on a side stream as capture requires
            self.side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(self.side):
                self._step(self.bs, sample)
            torch.cuda.current_stream(self.device).wait_stream(self.side)
            self.warm += 1
            return
        if not self.on_gpu:  # the graphed path run eagerly (a CPU): the same body
            self._step(self.bs, sample)
            return
        if self.graph is None:
            graph = torch.cuda.CUDAGraph()
            for generator in self.augmenters if self.augment else ():
                graph.register_generator_state(generator)  # replays draw on, as the eager steps would
            self._before_capture()
            try:
                with torch.cuda.graph(graph):
                    self._step(self.bs, "device" if self.layers is not None else False)
            except RuntimeError as e:  # nothing ran during the failed capture: this step and the rest run eagerly
                self.fallback = (f"capture failed, eager from epoch step {self.steps + 1}: "
                                 f"{str(e).splitlines()[0][:200]}")
                self.graphed = self.on_gpu = False
                torch.cuda.synchronize(self.device)
                self._step(self.bs, sample)
                return
            self.graph = graph
        self.graph.replay()

    def _before_capture(self):
        """What a capture needs first (a run: its gradients unset, so that the captured backward allocates them)."""

    def record_step(self, loss, accuracy):
        """Write a step's (loss, accuracy) into ``records`` at the epoch's step count, on the device."""
        record = torch.stack([loss.detach().to(self.records.dtype), accuracy.to(self.records.dtype)])
        self.records.index_copy_(0, self.count, record[None])
        self.count.add_(1)


class TrainStep(Step):
    """One run's training step: forward of ``prepare(images)`` under ``autocast``, cross-entropy under
    ``loss_autocast`` (``loss_fp32``: of the logits cast to float32; under autocast they are bf16 or fp16, and so is the
    loss otherwise), backward through ``scaler``, the per-layer gradient norms where sampled, clipping to
    ``grad_clip`` (the gradients' total norm, ``torch.nn.utils.clip_grad_norm_``; None: none), the optimizer's step.
    See ``Step`` for the batch, the records and the graph. ``prepare``: uint8 batch -> model input (default
    ``data.normalize``)."""

    def __init__(self, model, optimizer, scaler, images, labels, *, autocast, loss_autocast, prepare=None,
                 loss_fp32=False, grad_clip=None, **step):
        super().__init__(images, labels, **step)
        self.model, self.optimizer, self.scaler, self.prepare = model, optimizer, scaler, prepare or normalize
        self.autocast, self.loss_autocast = autocast, loss_autocast
        self.loss_fp32, self.grad_clip = loss_fp32, grad_clip
        if self.on_gpu:
            for group in optimizer.param_groups:  # a device tensor, filled in place by ``set_lr``
                if not isinstance(group["lr"], torch.Tensor):
                    group["lr"] = torch.tensor(float(group["lr"]), device=self.device)
                group["capturable"] = True  # the step's own state on the device: torch refuses to capture it otherwise

    def _train(self, images, labels, sample):
        with self.autocast():
            logits = self.model(self.prepare(images))
        with self.loss_autocast():
            loss = F.cross_entropy(logits.float() if self.loss_fp32 else logits, labels)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        unscaled = False
        if sample:
            if self.scaler.is_enabled():  # fp16: the gradients' own norms (the step then unscales no more)
                self.scaler.unscale_(self.optimizer)
                unscaled = True
            self.add_norms(layer_grad_norms(self.layers), sample)
        if self.grad_clip is not None:
            if self.scaler.is_enabled() and not unscaled:
                self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_([p for g in self.optimizer.param_groups for p in g["params"]],
                                           self.grad_clip, foreach=True)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.record_step(loss, (logits.argmax(dim=1) == labels).float().mean())

    def _before_capture(self):
        self.optimizer.zero_grad(set_to_none=True)  # the captured backward allocates the gradients it replays


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
