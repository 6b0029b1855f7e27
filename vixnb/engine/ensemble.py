"""Runs of one shape trained as ONE vectorised ensemble, so that small models fill a GPU with the host work of one.

Members: runs whose models have the same forward (``forward_signature``: the same modules with the same settings and
tensors of the same shapes; a setting a module declares ``init_only``, such as shaped attention's alpha/beta scheme,
may differ) under the same protocol (``MEMBER_SETTINGS`` are the only settings that may differ: the seed, the learning
rate, the weight decay, the warm-up and gradient clipping). ``check_members`` says why runs cannot share an ensemble.

The members' trainable parameters live in one (members, N) tensor (``Ensemble.flat``; each parameter a view of its
span), their gradients in another (``Ensemble.grad``), and the model is called once for all of them through
``functional_call`` under ``vmap``. Each member keeps what makes it a separate run (``train.train``): its
initialisation (its model built under ``torch.manual_seed(seed)`` with its own settings), its data order and its
augmentation (its own generators: ``steps.Step.batch`` draws each member's numbers, then flips and rotates every image
at once), its own selection epoch and best weights. ``MemberAdamW`` is torch's AdamW update with each member's own
learning rate (the epoch's schedule times its warm-up ramp), weight decay and step count on the device; gradient
clipping is each member's own total norm; the loss is the sum of the members' mean cross-entropies, so each member's
gradient is its own run's. A member whose loss stops being finite is stopped alone (``train.training_steps``).

Exactness (``can_ensemble``): with AdamW, no RandAugment, no post-training, no ``amp_loss_only`` or fp16 scaler, no
``compile`` and no active dropout, a member's history, metrics and weights equal its separate run's up to
floating-point rounding (batched kernels sum in another order; ``tests/test_ensemble.py`` checks it on the CPU, in
float64 to 1e-10). One exception, in the weights only: an element whose gradient is zero but for rounding (a bias a
following LayerNorm cancels) gets AdamW steps of g / (sqrt(v) + eps) made of rounding noise, up to lr each, in a
separate run as much as in an ensemble. With dropout, ``vmap(randomness="different")`` draws each member's own masks,
which cannot equal a separate run's: ``exact=False`` trains such models anyway and says so in each result's provenance
(``ensemble_exact: False``).

BatchNorm: under ``vmap`` with stacked buffers, a BatchNorm layer in training mode normalises each member's batch by
its own statistics and updates that member's running statistics in place; in eval mode it uses each member's own.

Not supported (``can_ensemble`` says why): DualOpT (members would switch to SGD at different epochs), SGD alone,
RandAugment (per-image draws from the global RNG), post-training, the authors' AMP and fp16 (one gradient scaler would
skip every member's step when one overflows), ``compile``, warm starts, and the Performer's feature redraw (a
data-dependent buffer update). ``channels_last`` is not applied (stacked tensors are contiguous). On a CPU, fused
attention (``scaled_dot_product_attention``) has no batching rule and runs member by member (PyTorch warns once).

Checkpoint (``train.training_steps``): the keys of a single run's, where ``model`` and ``best_state`` hold every entry
of the model's ``state_dict`` stacked over members (``member_state(state, i)`` is member i's, loadable into the
model), ``optimizer`` is ``MemberAdamW``'s state, ``shuffle`` and ``augment_rng`` the members' generator states,
``history`` their histories, plus ``seeds`` and ``keys`` (the members' run keys: which ensemble it belongs to).
A result's ``seconds`` and GPU memory are those of the whole ensemble.
"""
import copy
import hashlib
import json

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

from ..data import normalize
from ..layers import ShapedAttention
from ..layers.blocks import DropPath
from ..models import model_fact, settings_from_key
from .steps import Step

#: the settings in which the members of one ensemble may differ, each member with its own (besides the model settings
#: its modules declare ``init_only``): everything else of their configs is one protocol
MEMBER_SETTINGS = ("seed", "lr", "weight_decay", "warmup_steps", "grad_clip", "model_overrides", "init_std")


def _active_dropout(model):
    """(name, p) of every module of ``model`` that draws random numbers in training: dropout and stochastic depth
    (``layers.blocks.DropPath``) with p > 0, and mixers with dropout on their attention weights
    (``attn_dropout`` > 0, e.g. CCT's)."""
    found = []
    for name, m in model.named_modules():
        if isinstance(m, (nn.modules.dropout._DropoutNd, DropPath)) and m.p > 0:
            found.append((name, m.p))
        elif getattr(m, "attn_dropout", 0) > 0:
            found.append((name, m.attn_dropout))
    return found


def _settings_json(config):
    return json.dumps(settings_from_key(config["model"], config["model_overrides"]), sort_keys=True)


def can_ensemble(config, *, exact=True):
    """(True, None) where runs of ``config`` can train as members of one ensemble whose members equal separate runs
    (with ``exact=False``: where they can train at all, dropout drawn per member); else (False, the reason)."""
    refused = [
        (config["optimizer"] == "dualopt", "optimizer 'dualopt' switches each member to SGD at its own epoch; use "
                                           "optimizer 'adamw' or train the runs separately"),
        (config["optimizer"] == "sgd", "optimizer 'sgd': an ensemble trains with AdamW; use optimizer 'adamw' or train "
                                       "the runs separately"),
        (config["randaugment"], "randaugment draws each image's augmentation from the global RNG, so a member "
                                "cannot see its separate run's images; leave it off or train the runs separately"),
        (config["post_train_epochs"], "post_train_epochs: post-training stops each member at its own epoch; set it "
                                      "to 0 or train the runs separately"),
        (config["amp_loss_only"], "amp_loss_only: one GradScaler would skip every member's step when one member "
                                  "overflows; leave it off or train the runs separately"),
        (config["precision"] == "fp16", "precision fp16: one GradScaler would skip every member's step when one member "
                                        "overflows; train the runs separately"),
        (config["compile"], "compile: the vmapped ensemble step is not compiled; leave compile off"),
        (config.get("init_from"), "init_from: each run starts from its own source run's weights; train the runs "
                                  "separately"),
    ]
    for bad, reason in refused:
        if bad:
            return False, reason
    dropout, redraws = model_fact(random_draws, config["model"], config["dataset"], _settings_json(config))
    if exact and dropout:
        where = f"p={dropout[0][1]} in {len(dropout)} modules, e.g. {dropout[0][0]}"
        return False, (f"{config['model']} has active dropout ({where}): under vmap each member draws its own masks, "
                       "which cannot equal a separate run's; train the runs separately, or pass exact=False for "
                       "independent masks per member")
    if redraws:
        return False, (f"{config['model']} redraws Performer features (a data-dependent buffer update vmap cannot "
                       "batch); train the runs separately")
    return True, None


def random_draws(model):
    """``[[name, p] of each module drawing dropout masks (_active_dropout)], whether it redraws Performer features]``
    of a built model: what ``can_ensemble`` reads (kept between processes: ``models.model_fact``)."""
    return [[list(d) for d in _active_dropout(model)],
            any(getattr(m, "feature_redraw_interval", None) is not None for m in model.modules())]


def _setting(value):
    """A module attribute as the signature compares it: callables by their qualified name, containers item by item."""
    if isinstance(value, (list, tuple)):
        return [_setting(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _setting(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (bool, int, float, str, type(None))):
        return value
    if isinstance(value, torch.Tensor):
        return [str(value.dtype), list(value.shape)]
    if callable(value):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', type(value).__qualname__)}"
    return type(value).__qualname__


def forward_signature(model):
    """A digest of what ``model``'s forward is made of: every module's type and public settings (less the ones it
    declares ``init_only``: they only set initial values), and every parameter's and buffer's name, shape and dtype.
    Runs whose models share it run one forward, the first member's (``Ensemble``)."""
    parts = []
    for name, m in model.named_modules():
        skip = set(getattr(m, "init_only", ())) | {"training"}
        settings = {k: _setting(v) for k, v in vars(m).items() if not k.startswith("_") and k not in skip}
        parts.append([name, type(m).__module__ + "." + type(m).__qualname__, settings])
    parts.append([[n, list(t.shape), str(t.dtype)] for n, t in model.state_dict().items()])
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def member_shape(config):
    """What the members of one ensemble share (a hashable value): the run's protocol (its config less
    ``MEMBER_SETTINGS``) and its model's ``forward_signature`` (kept between processes: ``models.model_fact``)."""
    protocol = {k: v for k, v in config.items() if k not in MEMBER_SETTINGS}
    signature = model_fact(forward_signature, config["model"], config["dataset"], _settings_json(config))
    return json.dumps([protocol, signature], sort_keys=True, default=str)


def check_members(configs):
    """The members' seeds, or a one-line error where ``configs`` cannot share an ensemble: no configs, runs of other
    shapes or protocols (``member_shape``: the keys that differ named), or a run given twice."""
    if not configs:
        raise ValueError("configs is empty: give one run_config(...) per member")
    first = configs[0]
    for c in configs[1:]:
        if member_shape(c) != member_shape(first):
            differ = sorted(k for k in set(c) | set(first) if k not in MEMBER_SETTINGS and c.get(k) != first.get(k))
            what = (f"differ in {', '.join(differ)}" if differ else
                    "have models whose forwards differ (modules, settings or tensor shapes)")
            raise ValueError(f"configs {what}: an ensemble trains runs of one shape and protocol, which may differ "
                             f"only in {', '.join(MEMBER_SETTINGS)} and initial values")
    keys = [json.dumps(c, sort_keys=True, default=str) for c in configs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"configs repeat a run (seeds {[c['seed'] for c in configs]}): give each run once")
    return [c["seed"] for c in configs]


class Ensemble:
    """Models of one forward as stacked parameters and buffers, called for all members at once through
    ``functional_call`` under ``vmap``: ``ensemble(x)`` with one batch per member (members, batch, ...),
    ``ensemble.shared(x)`` with one batch for all; both return logits (members, batch, classes). The trainable
    parameters are views of ``flat`` (members, N), their gradients views of ``grad`` (accumulated in place by
    backward: zero it, never set the gradients to None). ``randomness``: vmap's ("error": a random operation is an
    error; "different": own draws per member)."""

    def __init__(self, models, *, randomness="error"):
        models = list(models)
        first, k = models[0], len(models)
        each = [dict(m.named_parameters()) for m in models]
        trainable = [n for n, p in first.named_parameters() if p.requires_grad]
        sizes = [each[0][n].numel() for n in trainable]
        reference = each[0][trainable[0]]
        self.flat = torch.empty(k, sum(sizes), dtype=reference.dtype, device=reference.device)
        self.grad = torch.zeros_like(self.flat)
        self.params, self.spans, start = {}, {}, 0
        with torch.no_grad():
            for name, size in zip(trainable, sizes):
                shape, end = each[0][name].shape, start + size
                self.flat[:, start:end].copy_(torch.stack([p[name].detach().reshape(-1) for p in each]))
                leaf = self.flat[:, start:end].view(k, *shape).detach().requires_grad_()
                leaf.grad = self.grad[:, start:end].view(k, *shape)
                self.params[name], self.spans[name], start = leaf, (start, end), end
        for name, _ in first.named_parameters():
            if name not in self.params:  # frozen: stacked, without gradients
                self.params[name] = torch.stack([p[name].detach() for p in each])
        self.buffers = {name: torch.stack([dict(m.named_buffers())[name] for m in models])
                        for name, _ in first.named_buffers()}
        self.keys = list(first.state_dict())  # what a member's state holds (not non-persistent buffers)
        self.template = copy.deepcopy(first).to("meta")

        def call(params, buffers, x):
            return functional_call(self.template, (params, buffers), (x,))

        self._each = vmap(call, randomness=randomness)
        self._shared = vmap(call, in_dims=(0, 0, None), randomness=randomness)

    def __len__(self):
        return len(self.flat)

    def __call__(self, x):
        return self._each(self.params, self.buffers, x)

    def shared(self, x):
        return self._shared(self.params, self.buffers, x)

    def train(self, mode=True):
        self.template.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def state_dict(self):
        """Every entry of a member's ``state_dict``, stacked over members (views of the live tensors)."""
        stacked = {**self.params, **self.buffers}
        return {k: stacked[k].detach() for k in self.keys}

    def load_state_dict(self, state):
        with torch.no_grad():
            for k, v in self.state_dict().items():
                v.copy_(state[k])

    def layer_spans(self, layers):
        """The (start, end) of each layer's parameters in ``flat`` (``layers``: each layer's parameter names, as
        ``train.layer_names`` gives them; a layer's parameters are one span, registered together)."""
        spans = []
        for names in layers:
            parts = sorted(self.spans[n] for n in names if n in self.spans)
            if any(a[1] != b[0] for a, b in zip(parts, parts[1:])):
                raise ValueError(f"the parameters of layer {names[0]!r} are not registered together")
            spans.append((parts[0][0], parts[-1][1]))
        return spans

    def decay_mask(self, scope):
        """A (1, N) mask of the elements weight decay applies to under ``scope`` (``"all"``: None, every element;
        ``"matrices"``: parameters of two or more dimensions, not biases, norms' weights or gains)."""
        if scope == "all":
            return None
        mask = torch.zeros(1, self.flat.shape[1], dtype=self.flat.dtype, device=self.flat.device)
        for name, (start, end) in self.spans.items():
            if self.params[name].dim() - 1 >= 2:
                mask[:, start:end] = 1
        return mask


def member_state(state, member):
    """Member ``member``'s state dict (as a separate run's ``model.state_dict()``) from a stacked ensemble
    state: a checkpoint's ``model`` or ``best_state``, or ``Ensemble.state_dict()``."""
    return {k: v[member] for k, v in state.items()}


class MemberAdamW:
    """torch's AdamW update (decoupled weight decay, bias-corrected moments) of an ensemble's ``flat`` parameters from
    its ``grad``, each member with its own learning rate (``configs``' ``lr`` times the epoch's schedule factor,
    ``set_epoch``, times its own linear warm-up over ``warmup_steps``), weight decay (on the elements ``decay``
    selects: ``Ensemble.decay_mask``), and the step count on the device: no host value inside a step (a CUDA graph
    captures it). ``betas`` and ``eps`` are the protocol's, one for all."""

    capturable = True  # its step reads no host value (``steps.graph_blocker``)

    def __init__(self, ensemble, configs, decay=None):
        flat = ensemble.flat
        column = lambda values: torch.tensor(values, dtype=flat.dtype, device=flat.device)[:, None]  # noqa: E731
        self.ensemble, self.decay = ensemble, decay
        self.lr = column([c["lr"] for c in configs])  # this epoch's, filled by set_epoch
        self.weight_decay = column([c["weight_decay"] for c in configs])
        self.warmup = column([c.get("warmup_steps", 0) for c in configs])
        (self.beta1, self.beta2), self.eps = configs[0]["betas"], configs[0]["eps"]
        self.exp_avg, self.exp_avg_sq = torch.zeros_like(flat), torch.zeros_like(flat)
        self.steps = torch.zeros((), dtype=flat.dtype, device=flat.device)

    def set_epoch(self, lrs):
        """Each member's learning rate for the epoch (``lrs``: one number per member)."""
        self.lr.copy_(torch.tensor(lrs, dtype=self.lr.dtype)[:, None])

    def step(self):
        p, g = self.ensemble.flat, self.ensemble.grad
        self.steps.add_(1)
        ramp = torch.where(self.warmup > 0, torch.clamp(self.steps / self.warmup.clamp(min=1), max=1.0),
                           torch.ones_like(self.warmup))  # step n of a warm-up of W: lr (n + 1) / W, as a run's
        lr = self.lr * ramp
        decay = lr * self.weight_decay if self.decay is None else lr * self.weight_decay * self.decay
        p.mul_(1 - decay)
        self.exp_avg.lerp_(g, 1 - self.beta1)
        self.exp_avg_sq.mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
        correction1, correction2 = 1 - self.beta1 ** self.steps, 1 - self.beta2 ** self.steps
        denom = (self.exp_avg_sq.sqrt() / correction2.sqrt()).add_(self.eps)
        p.addcdiv_(self.exp_avg, denom * (-correction1 / lr))  # p - lr / correction1 * exp_avg / denom

    def state_dict(self):
        return {"exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq, "steps": self.steps}

    def load_state_dict(self, state):
        for name, value in self.state_dict().items():
            value.copy_(state[name])


class EnsembleStep(Step):
    """The training step of every member on its own batch (``steps.Step``: each member's order and generators): the
    members' mean cross-entropies (of float32 logits where ``loss_fp32``), their sum's backward, each member's per-layer
    gradient norms where sampled (``layers``: the layers' spans in ``flat``), each member's gradients clipped to its
    own total norm ``grad_clip`` (a (members, 1) tensor, inf for none; None where no member clips), and
    ``MemberAdamW``'s step; records each member's (loss, accuracy)."""

    def __init__(self, ensemble, optimizer, images, labels, *, autocast, loss_fp32=False, grad_clip=None, **step):
        self.record_shape = (len(ensemble),)
        super().__init__(images, labels, **step)
        self.ensemble, self.optimizer, self.autocast = ensemble, optimizer, autocast
        self.loss_fp32, self.grad_clip = loss_fp32, grad_clip
        self.cross_entropy = vmap(F.cross_entropy)

    def _norm_shape(self):
        return (len(self.ensemble), len(self.layers))

    def _train(self, images, labels, sample):
        with self.autocast():
            logits = self.ensemble(normalize(images))
        losses = self.cross_entropy(logits.float() if self.loss_fp32 else logits, labels)  # each member's own mean
        grad = self.ensemble.grad
        grad.zero_()
        losses.sum().backward()  # the sum: each member's gradient is that of its own mean loss
        if sample:
            norms = torch.stack([torch.linalg.vector_norm(grad[:, a:b], dim=1) for a, b in self.layers], dim=1)
            self.add_norms(norms, sample)
        if self.grad_clip is not None:  # each member's total norm, as clip_grad_norm_ of its own run
            total = torch.linalg.vector_norm(grad, dim=1, keepdim=True)
            grad.mul_(torch.clamp(self.grad_clip / (total + 1e-6), max=1.0))
        self.optimizer.step()
        self.record_step(losses, (logits.argmax(dim=-1) == labels).float().mean(dim=-1))


@torch.no_grad()
def ensemble_alpha_beta(ensemble):
    """Each member's [[alpha, beta], ...] of its ``ShapedAttention`` layers in module order, or None (one sync)."""
    names = [n for n, m in ensemble.template.named_modules() if isinstance(m, ShapedAttention)]
    if not names:
        return None
    p = ensemble.params
    return torch.stack([torch.stack([p[f"{n}.alpha"], p[f"{n}.beta"]], -1) for n in names], 1).tolist()
