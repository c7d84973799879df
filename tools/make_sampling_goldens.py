#!/usr/bin/env python3
"""Golden files for the sampler's filters and the token penalties, computed by transformers'
own logits processors, never by our code.

Each case is a random logits vector over a small vocabulary, a token history (prompt and
generated tokens) and sampling parameters. The goldens hold:
  penalised: the logits after the penalties. The repetition penalty is transformers'
    RepetitionPenaltyLogitsProcessor over prompt + generated tokens. transformers has no
    presence or frequency penalty, so those are plain torch, as OpenAI defines them:
    logit -= frequency * count + presence * (count > 0), count over the generated tokens only,
    applied after the repetition penalty (vLLM's and llama.cpp's order).
  probs: the sampling distribution: softmax after TemperatureLogitsWarper, TopKLogitsWarper,
    TopPLogitsWarper and MinPLogitsWarper, in that order (transformers' order in generate).

Ties: transformers keeps every token tied with the k-th logit and orders equal probabilities at
the top-p boundary as torch.sort happens to; our sampler keeps exactly k and the lower token id
first (spec/sampler.h). So every case is drawn without ties and with its top-k, top-p and min-p
boundaries at least MARGIN away from a decision (resampled otherwise), where both rules agree.

Usage: .venv-ref/bin/python tools/make_sampling_goldens.py [--out tests/goldens/sampling]
"""
import argparse
import json
import pathlib

import torch
import transformers
from transformers import (MinPLogitsWarper, RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper,
                          TopKLogitsWarper, TopPLogitsWarper)

VOCAB = 48
MARGIN = 1e-3  # relative distance every filter boundary keeps from its decision

# name, temperature, top_k, top_p, min_p, repetition, presence, frequency
CASES = [
    ("temperature_only", 0.7, 0, 1.0, 0.0, 1.0, 0.0, 0.0),
    ("hot_top_k", 1.5, 9, 1.0, 0.0, 1.0, 0.0, 0.0),
    ("top_p", 1.0, 0, 0.9, 0.0, 1.0, 0.0, 0.0),
    ("top_p_small", 1.3, 0, 0.5, 0.0, 1.0, 0.0, 0.0),
    ("min_p", 1.0, 0, 1.0, 0.1, 1.0, 0.0, 0.0),
    ("top_k_top_p_min_p", 0.8, 20, 0.95, 0.05, 1.0, 0.0, 0.0),
    ("repetition", 1.0, 0, 1.0, 0.0, 1.3, 0.0, 0.0),
    ("repetition_below_one", 0.9, 0, 0.95, 0.0, 0.8, 0.0, 0.0),
    ("presence_frequency", 1.0, 0, 1.0, 0.0, 1.0, 0.5, 0.3),
    ("negative_presence_frequency", 1.0, 0, 1.0, 0.0, 1.0, -0.7, -0.4),
    ("all_penalties_all_filters", 0.7, 24, 0.9, 0.02, 1.1, 0.4, 0.6),
    ("all_penalties_top_k", 1.2, 6, 1.0, 0.0, 1.5, 1.5, 2.0),
]


def penalise(logits, prompt, generated, repetition, presence, frequency):
    history = torch.tensor([prompt + generated])
    x = RepetitionPenaltyLogitsProcessor(repetition)(history, logits.clone()) if repetition != 1.0 else logits.clone()
    count = torch.bincount(torch.tensor(generated, dtype=torch.long), minlength=VOCAB).to(torch.float32)
    return x - frequency * count - presence * (count > 0).to(torch.float32)


def filtered_probs(x, temperature, top_k, top_p, min_p):
    ids = torch.zeros((1, 1), dtype=torch.long)  # the warpers do not read the history
    x = TemperatureLogitsWarper(temperature)(ids, x)
    if top_k > 0:
        x = TopKLogitsWarper(top_k)(ids, x)
    if top_p < 1.0:
        x = TopPLogitsWarper(top_p)(ids, x)
    if min_p > 0.0:
        x = MinPLogitsWarper(min_p)(ids, x)
    return torch.softmax(x, dim=-1)


def clear_of_boundaries(x, temperature, top_k, top_p, min_p):
    """Whether no tie and no near-decision sits at a filter boundary (see the docstring)."""
    v = (x / temperature)[0].double()
    s = torch.sort(v, descending=True).values
    if torch.any((s[:-1] - s[1:]) < MARGIN):
        return False  # ties or near-ties anywhere
    if top_k > 0:
        s = s[:top_k]
    p = torch.softmax(s, dim=0)
    if top_p < 1.0:
        before = torch.cumsum(p, dim=0) - p  # mass before each token, descending
        if torch.any((before - top_p).abs() < MARGIN):
            return False
        p = p[before < top_p]
        p = p / p.sum()
    if min_p > 0.0:
        if torch.any((p - min_p * p[0]).abs() < MARGIN * p[0]):
            return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/goldens/sampling")
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(33)
    cases = []
    for name, temperature, top_k, top_p, min_p, repetition, presence, frequency in CASES:
        for _ in range(1000):
            logits = (torch.randn((1, VOCAB), generator=gen) * 2.5).to(torch.float32)
            prompt = torch.randint(0, VOCAB, (10,), generator=gen).tolist()
            generated = torch.randint(0, VOCAB // 2, (14,), generator=gen).tolist()  # repeats
            x = penalise(logits, prompt, generated, repetition, presence, frequency)
            probs = filtered_probs(x.clone(), temperature, top_k, top_p, min_p)
            kept = int((probs > 0).sum())
            filters = top_k or top_p < 1.0 or min_p
            if clear_of_boundaries(x, temperature, top_k, top_p, min_p) and not (filters and kept in (1, VOCAB)):
                break
        else:
            raise SystemExit(f"{name}: no case clear of its boundaries that keeps 2..{VOCAB - 1} tokens in 1000 draws")
        cases.append({
            "name": name,
            "params": {"temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p,
                       "repetition_penalty": repetition, "presence_penalty": presence,
                       "frequency_penalty": frequency},
            "prompt": prompt,
            "generated": generated,
            "logits": logits[0].tolist(),
            "penalised": x[0].tolist(),
            "probs": probs[0].tolist(),
            "kept": kept,
        })
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"generator": f"tools/make_sampling_goldens.py, transformers {transformers.__version__}, torch {torch.__version__}",
           "vocab": VOCAB, "cases": cases}
    (out / "filters.json").write_text(json.dumps(doc, indent=1) + "\n")
    for c in cases:
        print(f"{c['name']}: kept {c['kept']} of {VOCAB}")


if __name__ == "__main__":
    main()
