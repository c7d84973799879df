"""Train the pair's target: a small transformers Qwen3ForCausalLM on the stdlib corpus.

Next-token cross-entropy on random seq-token windows of work/train.bin, AdamW with linear warm-up
and cosine decay to 10%, f32 weights with bf16 autocast (the CPU's AMX units). Held-out loss is
measured on fixed non-overlapping windows of work/heldout.bin. A checkpoint is written every
--ckpt-min minutes and a rerun resumes from it; the final model is saved with save_pretrained in
bf16 (config.json, model.safetensors, generation_config.json) next to the tokenizer files.

  .venv-ref/bin/python tools/pair/train_target.py --bench      # tokens/s of this shape, then exit
  .venv-ref/bin/python tools/pair/train_target.py --steps 3000 # train, write models/dflash-pair/target
"""
import argparse
import json
import os
import shutil
import time

import numpy as np
import torch
from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

from common import EOT_ID, IM_END_ID, MODELS, WORK, Log, load_checkpoint, lr_at, load_tokens, save_checkpoint, setup_torch


def make_config(a):
    return Qwen3Config(vocab_size=4096, hidden_size=a.hidden, intermediate_size=a.inter,
                       num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                       head_dim=a.head_dim, max_position_embeddings=4096, tie_word_embeddings=True,
                       rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, rms_norm_eps=1e-6,
                       bos_token_id=None, eos_token_id=IM_END_ID, pad_token_id=EOT_ID)


def batch(tokens, rng, n, seq):
    starts = rng.integers(0, len(tokens) - seq - 1, size=n)
    x = np.stack([tokens[s:s + seq + 1] for s in starts]).astype(np.int64)
    return torch.from_numpy(x)


def lm_loss(model, x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(input_ids=x[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))


@torch.no_grad()
def heldout_loss(model, tokens, seq, windows):
    model.eval()
    n = min(windows, (len(tokens) - 1) // seq)
    x = torch.from_numpy(np.stack([tokens[i * seq:i * seq + seq + 1] for i in range(n)]).astype(np.int64))
    losses = [lm_loss(model, x[i:i + 16]).item() * len(x[i:i + 16]) for i in range(0, n, 16)]
    model.train()
    return sum(losses) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--inter", type=int, default=768)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-windows", type=int, default=256)
    ap.add_argument("--ckpt-min", type=float, default=4.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bench", action="store_true", help="time 5 steps and exit")
    ap.add_argument("--out", default=os.path.join(MODELS, "target"))
    a = ap.parse_args()
    setup_torch(a.threads, a.seed)
    log = Log()
    train, held = load_tokens("train.bin"), load_tokens("heldout.bin")
    model = Qwen3ForCausalLM(make_config(a))
    params = sum(p.numel() for p in model.parameters())
    log(f"target: {a.layers} layers, hidden {a.hidden}, {params / 1e6:.2f}M params; train {len(train)} tokens")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.95))
    ckpt_path = os.path.join(WORK, "target_ckpt.pt")
    rng = np.random.default_rng(a.seed)
    step, history = 0, []
    state = None if a.bench else load_checkpoint(ckpt_path)
    if state:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, history = state["step"], state["history"]
        rng.bit_generator.state = state["rng"]
        torch.set_rng_state(state["torch_rng"])
        log(f"resumed at step {step}")
    model.train()
    last_ckpt = time.time()
    t_mark, tok_mark = time.time(), 0
    while step < (5 if a.bench else a.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        loss = lm_loss(model, batch(train, rng, a.batch, a.seq))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tok_mark += a.batch * a.seq
        if a.bench:
            if step == 1:
                t_mark, tok_mark = time.time(), 0
            continue
        if step % 25 == 0:
            tps = tok_mark / (time.time() - t_mark)
            log(f"step {step}/{a.steps} loss {loss.item():.4f} lr {lr_at(step, a):.2e} {tps:.0f} tok/s")
            t_mark, tok_mark = time.time(), 0
        if step % a.eval_every == 0 or step == a.steps:
            h = heldout_loss(model, held, a.seq, a.eval_windows)
            history.append({"step": step, "tokens": step * a.batch * a.seq, "train_loss": loss.item(), "heldout_loss": h})
            log(f"step {step} heldout loss {h:.4f}")
        if time.time() - last_ckpt > a.ckpt_min * 60 or step == a.steps:
            save_checkpoint(ckpt_path, model=model.state_dict(), opt=opt.state_dict(), step=step, history=history,
                            rng=rng.bit_generator.state, torch_rng=torch.get_rng_state())
            last_ckpt = time.time()
    if a.bench:
        log(f"bench: {tok_mark / (time.time() - t_mark):.0f} tok/s (batch {a.batch} x seq {a.seq})")
        return
    save(model, a, params, history)
    log(f"saved {a.out}")


def save(model, a, params, history):
    model = model.to(torch.bfloat16)
    model.config.architectures = ["Qwen3ForCausalLM"]
    model.save_pretrained(a.out)
    GenerationConfig(eos_token_id=[IM_END_ID, EOT_ID], pad_token_id=EOT_ID, bos_token_id=None,
                     do_sample=False).save_pretrained(a.out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(WORK, "tokenizer", name), os.path.join(a.out, name))
    summary = {"params": params, "steps": a.steps, "batch": a.batch, "seq": a.seq,
               "tokens_seen": a.steps * a.batch * a.seq, "history": history}
    with open(os.path.join(WORK, "target_summary.json"), "w") as f:
        json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
