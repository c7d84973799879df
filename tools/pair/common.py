"""Shared pieces of the pair trainers: paths, token arrays, checkpoints, lr schedule, a plain timer log."""
import math
import os
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "work")
REPO = os.path.dirname(os.path.dirname(HERE))
MODELS = os.path.join(REPO, "models", "dflash-pair")
EOT_ID, IM_START_ID, IM_END_ID, MASK_ID = 0, 1, 2, 3  # fixed by train_tokenizer.SPECIALS


def load_tokens(name):
    return np.fromfile(os.path.join(WORK, name), dtype=np.uint16)


def setup_torch(threads, seed):
    torch.set_num_threads(threads)
    torch.manual_seed(seed)


def save_checkpoint(path, **state):
    # Write then rename, so a run killed mid-save leaves the previous checkpoint intact.
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)


def load_checkpoint(path):
    return torch.load(path, weights_only=False) if os.path.exists(path) else None


class Log:
    def __init__(self):
        self.t0 = time.time()

    def __call__(self, msg):
        print(f"[{(time.time() - self.t0) / 60:6.1f} min] {msg}", flush=True)


def lr_at(step, a):
    """Linear warm-up over a.warmup steps, then cosine from a.lr down to 10% at a.steps."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    p = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))
