"""Train the pair's DFlash draft against the frozen target, saved in z-lab's checkpoint format.

The model class and config are z-lab's (dflash.model.DFlashDraftModel over a Qwen3Config with
block_size, num_target_layers and dflash_config {target_layer_ids, mask_token_id}), so
save_pretrained writes exactly their layout. Objective (docs/dflash.md, "Training"):
  - the target (frozen, with its tied embedding/LM head) runs over a generated sequence and its
    layers' outputs at target_layer_ids are the context features of every position;
  - --anchors random anchor positions in the target-written part each open a block
    [token at anchor, MASK x (B-1)] at positions anchor..anchor+B-1;
  - a block's queries see the context features of positions strictly before its anchor and the
    whole of its own block (bidirectional), never another block;
  - row k (1..B-1) predicts the token at anchor+k; cross-entropy weighted by exp(-(k-1)/gamma).
All blocks of a sequence run in one forward pass with a boolean attention mask.

  .venv-ref/bin/python tools/pair/train_draft.py --steps 1000  ->  models/dflash-pair/draft
--init DIR starts from a saved draft's weights (same shapes) with a fresh optimiser and schedule.
"""
import argparse
import json
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from dflash.model import DFlashDraftModel
from transformers import Qwen3Config, Qwen3ForCausalLM

from common import MASK_ID, MODELS, WORK, Log, load_checkpoint, lr_at, save_checkpoint, setup_torch


def make_config(target_cfg, a):
    cfg = Qwen3Config(vocab_size=target_cfg.vocab_size, hidden_size=target_cfg.hidden_size,
                      intermediate_size=a.inter, num_hidden_layers=a.layers,
                      num_attention_heads=target_cfg.num_attention_heads,
                      num_key_value_heads=target_cfg.num_key_value_heads, head_dim=target_cfg.head_dim,
                      max_position_embeddings=target_cfg.max_position_embeddings,
                      rope_parameters=dict(target_cfg.rope_parameters), rms_norm_eps=target_cfg.rms_norm_eps,
                      tie_word_embeddings=False, bos_token_id=None, eos_token_id=target_cfg.eos_token_id)
    cfg.architectures = ["DFlashDraftModel"]
    cfg.block_size = a.block
    cfg.num_target_layers = target_cfg.num_hidden_layers
    cfg.dflash_config = {"target_layer_ids": a.target_layer_ids, "mask_token_id": MASK_ID}
    return cfg


def pick_anchors(rng, prompt_len, seq, n, block):
    lo = max(1, int(prompt_len))  # anchors in the target's own text; each needs one context row
    hi = seq - block              # the whole block's labels lie inside the sequence
    return np.sort(rng.choice(np.arange(lo, hi + 1), size=n, replace=False))


def block_inputs(tokens, anchors, block):
    """Block token ids [b, N*B], labels [b, N, B-1], positions [b, N*B], mask [b, 1, N*B, T+N*B]."""
    b, seq = tokens.shape
    n = anchors.shape[1]
    offs = torch.arange(block)
    pos = anchors[:, :, None] + offs                                     # [b, N, B]
    ids = torch.full((b, n, block), MASK_ID, dtype=torch.long)
    ids[:, :, 0] = tokens.gather(1, anchors)
    labels = tokens.gather(1, pos[:, :, 1:].reshape(b, -1)).view(b, n, block - 1)
    ctx_visible = torch.arange(seq)[None, None, :] < anchors[:, :, None]  # [b, N, T]: strictly before
    ctx_visible = ctx_visible[:, :, None, :].expand(b, n, block, seq).reshape(b, n * block, seq)
    block_of = torch.arange(n * block) // block
    own = (block_of[:, None] == block_of[None, :])[None].expand(b, -1, -1)
    mask = torch.cat([ctx_visible, own], dim=-1)[:, None]
    return ids.view(b, -1), labels, pos.view(b, -1), mask


def draft_loss(draft, target, tokens, anchors, a, weights):
    b, seq = tokens.shape
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        hs = target.model(input_ids=tokens, output_hidden_states=True).hidden_states
        features = torch.cat([hs[i + 1] for i in a.target_layer_ids], dim=-1)
    ids, labels, block_pos, mask = block_inputs(tokens, anchors, a.block)
    embed = target.get_input_embeddings().weight
    position_ids = torch.cat([torch.arange(seq)[None].expand(b, -1), block_pos], dim=1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        hidden = draft(position_ids=position_ids, attention_mask=mask, noise_embedding=F.embedding(ids, embed),
                       target_hidden=features)
        hidden = hidden.view(b, -1, a.block, hidden.shape[-1])[:, :, 1:]
        logits = target.lm_head(hidden)
    ce = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
    ce = ce.view(b, -1, a.block - 1)
    loss = (ce * weights).sum() / (weights.sum() * b * ce.shape[1])
    correct = (logits.argmax(-1) == labels)
    # Expected accepted prefix per block if the target agreed with these labels: a proxy for tau - 1.
    accepted = correct.int().cumprod(-1).sum(-1).float().mean()
    return loss, accepted, correct.float().mean(dim=(0, 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default=os.path.join(MODELS, "target"))
    ap.add_argument("--data", default=os.path.join(WORK, "gen.npz"))
    ap.add_argument("--init", metavar="DIR", help="start from this saved draft's weights")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--inter", type=int, default=768)
    ap.add_argument("--target-layer-ids", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 6])
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--gamma", type=float, default=7.0)
    ap.add_argument("--anchors", type=int, default=16)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--heldout-seqs", type=int, default=64, help="generated sequences kept out of training")
    ap.add_argument("--greedy-only", action="store_true",
                    help="train and evaluate on the greedy continuations only (the data's `sampled` flag): "
                         "greedy tau is what the draft is judged on")
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--ckpt-min", type=float, default=4.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(MODELS, "draft"))
    ap.add_argument("--run-name", default="draft", help="names work/NAME_ckpt.pt and work/NAME_summary.json, "
                    "so runs of several stages do not resume from each other's checkpoints")
    a = ap.parse_args()
    setup_torch(a.threads, a.seed)
    log = Log()
    target = Qwen3ForCausalLM.from_pretrained(a.target, dtype=torch.float32).eval().requires_grad_(False)
    draft = DFlashDraftModel(make_config(target.config, a)).float().train()
    if a.init:
        # Strict: a shape or name mismatch with the requested config is an error, not a silent partial load.
        draft.load_state_dict(DFlashDraftModel.from_pretrained(a.init, dtype=torch.float32).state_dict())
    params = sum(p.numel() for p in draft.parameters())
    data = np.load(a.data)
    tokens, prompt_len = torch.from_numpy(data["tokens"].astype(np.int64)), data["prompt_len"]
    if a.greedy_only:
        keep = ~data["sampled"]
        tokens, prompt_len = tokens[torch.from_numpy(keep)], prompt_len[keep]
    order = np.random.default_rng(a.seed + 1).permutation(len(tokens))
    held, train = order[:a.heldout_seqs], order[a.heldout_seqs:]
    log(f"draft: {a.layers} layers, {params / 1e6:.2f}M params, target_layer_ids {a.target_layer_ids}; "
        f"{len(train)} train / {len(held)} held-out sequences of {tokens.shape[1]}")
    weights = torch.exp(-torch.arange(a.block - 1, dtype=torch.float32) / a.gamma)
    opt = torch.optim.AdamW(draft.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.01)
    ckpt_path = os.path.join(WORK, f"{a.run_name}_ckpt.pt")
    rng = np.random.default_rng(a.seed)
    step, history = 0, []
    state = load_checkpoint(ckpt_path)
    if state:
        draft.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, history = state["step"], state["history"]
        rng.bit_generator.state = state["rng"]
        log(f"resumed at step {step}")

    def evaluate():
        draft.eval()
        erng = np.random.default_rng(1234)  # same anchors every evaluation
        losses, accs = [], []
        with torch.no_grad():
            for i in range(0, len(held), a.batch):
                idx = held[i:i + a.batch]
                anchors = torch.from_numpy(np.stack([pick_anchors(erng, prompt_len[j], tokens.shape[1], a.anchors, a.block)
                                                     for j in idx]))
                loss, acc, _ = draft_loss(draft, target, tokens[idx], anchors, a, weights)
                losses.append(loss.item())
                accs.append(acc.item())
        draft.train()
        return float(np.mean(losses)), float(np.mean(accs))

    if a.init and step == 0:
        # The starting point's numbers on this data's held-out set, for comparison with what follows.
        h_loss, h_acc = evaluate()
        history.append({"step": 0, "heldout_loss": h_loss, "heldout_accepted_per_block": h_acc})
        log(f"step 0 (--init {a.init}) heldout loss {h_loss:.4f} accepted/block {h_acc:.2f}")
    last_ckpt, t_mark = time.time(), time.time()
    while step < a.steps:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        idx = rng.choice(train, size=a.batch, replace=False)
        anchors = torch.from_numpy(np.stack([pick_anchors(rng, prompt_len[j], tokens.shape[1], a.anchors, a.block)
                                             for j in idx]))
        loss, acc, per_row = draft_loss(draft, target, tokens[idx], anchors, a, weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 25 == 0:
            log(f"step {step}/{a.steps} loss {loss.item():.4f} accepted/block {acc.item():.2f} "
                f"row1 {per_row[0]:.2f} row8 {per_row[7]:.2f} {(time.time() - t_mark) / 25:.2f} s/step")
            t_mark = time.time()
        if step % a.eval_every == 0 or step == a.steps:
            h_loss, h_acc = evaluate()
            history.append({"step": step, "train_loss": loss.item(), "heldout_loss": h_loss,
                            "heldout_accepted_per_block": h_acc})
            log(f"step {step} heldout loss {h_loss:.4f} accepted/block {h_acc:.2f}")
        if time.time() - last_ckpt > a.ckpt_min * 60 or step == a.steps:
            save_checkpoint(ckpt_path, model=draft.state_dict(), opt=opt.state_dict(), step=step,
                            history=history, rng=rng.bit_generator.state)
            last_ckpt = time.time()
    draft.to(torch.bfloat16).save_pretrained(a.out)
    with open(os.path.join(WORK, f"{a.run_name}_summary.json"), "w") as f:
        json.dump({"params": params, "init": a.init, "data": a.data, "sequences": len(tokens), "steps": a.steps,
                   "greedy_only": a.greedy_only, "lr": a.lr, "batch": a.batch, "anchors": a.anchors,
                   "target_layer_ids": a.target_layer_ids, "history": history}, f, indent=2)
    log(f"saved {a.out}")


if __name__ == "__main__":
    main()
