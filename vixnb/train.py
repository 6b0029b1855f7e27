"""The training engine for the papers' protocols, and `run`, which loads a stored result or trains.

Data stay on the device as uint8 tensors; batches are indexed there and normalised there (no
DataLoader workers on the hot path). The authors' protocol (notes section 3): AdamW, no schedule, no
augmentation, the test set evaluated every epoch, the reported number is the best test epoch, and top-1 /
top-5 are means of per-batch accuracies. Their two quirks are flags in the profile:
``amp_loss_only`` (autocast around the loss alone, with a GradScaler; the forward stays fp32) and
``eval_mode=False`` (never switching to eval mode for evaluation).
"""
import platform
import subprocess
import time
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from . import __version__
from .counting import count_params, summary_size_mb
from .data import load_split, normalize
from .profiles import run_config
from .registry import create_model
from .store import ResultsStore


def device_name(device):
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def git_commit():
    repo = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


def topk_correct(logits, labels, ks=(1, 5)):
    top = logits.topk(max(ks), dim=1).indices
    hits = top == labels[:, None]
    return [hits[:, :k].any(dim=1).float().mean().item() * 100 for k in ks]


def evaluate(model, images, labels, *, batch_size, autocast):
    """Authors' metric: the mean over test batches of each batch's top-1 / top-5 accuracy (%)."""
    top1, top5 = [], []
    with torch.no_grad(), autocast():
        for start in range(0, len(images), batch_size):
            logits = model(normalize(images[start:start + batch_size]))
            a1, a5 = topk_correct(logits.float(), labels[start:start + batch_size])
            top1.append(a1)
            top5.append(a5)
    return sum(top1) / len(top1), sum(top5) / len(top5)


def train(config, *, progress=True, device=None):
    """Train one run described by ``config`` (from ``profiles.run_config``); return the result dict."""
    device = torch.device(device or ("cuda" if config["device"] == "cuda" else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"profile {config['profile']!r} needs a CUDA GPU and none is available; use --profile smoke on a CPU")
    train_x, train_y = load_split(config["dataset"], "train", size=config["train_size"])
    test_x, test_y = load_split(config["dataset"], "test", size=config["test_size"])
    train_x, train_y, test_x, test_y = (t.to(device) for t in (train_x, train_y, test_x, test_y))

    seed, bs = config["seed"], config["batch_size"]
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        model = create_model(config["model"], dataset=config["dataset"], **config["model_overrides"])
        params_paper, params_true = count_params(model, "paper"), count_params(model, "true")
        size_mb = summary_size_mb(model)
        model.to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"], betas=tuple(config["betas"]),
                                      eps=config["eps"], weight_decay=config["weight_decay"])
        bf16 = config["precision"] == "bf16"
        autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if bf16 else nullcontext
        loss_autocast = (lambda: torch.autocast("cuda")) if config["amp_loss_only"] and device.type == "cuda" else nullcontext
        scaler = torch.amp.GradScaler("cuda", enabled=config["amp_loss_only"] and device.type == "cuda")
        shuffle = torch.Generator(device=device).manual_seed(seed)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

        history, start = [], time.perf_counter()
        epochs = tqdm(range(1, config["epochs"] + 1), desc=f"{config['model']} seed {seed}", disable=not progress, leave=False)
        for epoch in epochs:
            t0 = time.perf_counter()
            model.train()
            order = torch.randperm(len(train_x), device=device, generator=shuffle)
            loss_sum, correct, steps = 0.0, 0.0, 0
            for i in range(0, len(order), bs):
                idx = order[i:i + bs]
                with autocast():
                    logits = model(normalize(train_x[idx]))
                with loss_autocast():
                    loss = F.cross_entropy(logits, train_y[idx])
                if not torch.isfinite(loss):
                    raise FloatingPointError(
                        f"{config['model']}: loss became {loss.item()} at epoch {epoch}, step {steps + 1}; no result stored. "
                        "Try a lower lr or fp32 precision.")
                optimizer.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                loss_sum += loss.item()
                correct += (logits.argmax(dim=1) == train_y[idx]).float().mean().item()
                steps += 1
            if config["eval_mode"]:
                model.eval()
            top1, top5 = evaluate(model, test_x, test_y, batch_size=bs, autocast=autocast)
            history.append({"epoch": epoch, "train_loss": loss_sum / steps, "train_acc": 100 * correct / steps,
                            "test_top1": top1, "test_top5": top5, "seconds": time.perf_counter() - t0})
            epochs.set_postfix(loss=f"{loss_sum / steps:.3f}", top1=f"{top1:.2f}")

    best = max(history, key=lambda h: h["test_top1"])
    gpu = {}
    if device.type == "cuda":
        gpu = {"gpu_gb_allocated": torch.cuda.max_memory_allocated(device) / 1024**3,
               "gpu_gb_reserved": torch.cuda.max_memory_reserved(device) / 1024**3}
    return {
        "status": "done",
        "top1": best["test_top1"], "top5": best["test_top5"], "best_epoch": best["epoch"],
        "final_top1": history[-1]["test_top1"],
        "params_paper": params_paper, "params_true": params_true, "size_mb": size_mb, **gpu,
        "seconds": time.perf_counter() - start,
        "history": history,
        "provenance": {"profile": config["profile"], "device": device_name(device), "torch": torch.__version__,
                       "vixnb": __version__, "commit": git_commit(), "seed": seed,
                       "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
    }


def can_run(config):
    return config["device"] != "cuda" or torch.cuda.is_available()


def run(model, *, dataset="cifar10", profile="smoke", seed=0, recompute=False, store=None, progress=True, **overrides):
    """The stored result for this run if there is one, else train it (where the profile can run here),
    else a ``{"status": "not yet run"}`` record. ``recompute=True`` forces training."""
    config = run_config(model, dataset=dataset, profile=profile, seed=seed, **overrides)
    store = store if store is not None else ResultsStore()
    stored = None if recompute else store.get(config)
    if stored is not None:
        return stored
    if not can_run(config):
        return {"status": "not yet run", "config": config,
                "reason": f"profile {profile!r} needs a CUDA GPU; no stored result for this configuration"}
    result = train(config, progress=progress)
    store.put(config, result)
    return {**result, "config": config}
