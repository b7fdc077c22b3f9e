"""Train a small target and a smaller draft language model on the King James Bible, locally.

The corpus is public domain and comes from Debian's ``bible-kjv`` packages (``apt-get install
bible-kjv``; the ``bible`` program prints the verses). A byte-level BPE tokenizer is trained on it
with the ``tokenizers`` library, then two Llama-architecture causal LMs are trained from scratch on
2 CPU cores in minutes: a target ``p`` and a draft ``q`` about 7x cheaper per token. Everything is cached
under ``data/`` (git-ignored):

- ``data/pair/tokenizer``, ``data/pair/target``, ``data/pair/draft`` (``save_pretrained`` formats,
  load with ``AutoTokenizer`` / ``AutoModelForCausalLM.from_pretrained``),
- ``data/next_token_pairs.npz``: real next-token distributions of both models at held-out contexts
  (format: ``multidraft.bench.dataset``; used by ``python -m multidraft.bench --dataset PATH``),
- ``data/pair/report.json``: sizes, held-out perplexities and timings.

``--size large`` trains a 27 M-parameter target instead under
``data/pair-large`` and ``data/next_token_pairs-large.npz`` (about 12x the small target's compute per
step). The large pair of the benchmarks was made with
``--size large --context 128 --batch 8 --target-steps 1600 --lr 2e-3 --draft-steps 800 --distill``
(about an hour on one core; ``--distill`` trains the draft on the target's laws);
``--draft-size medium`` adds a 2.1 M-parameter draft (``draft-medium/``, reusing the cached target,
dataset ``next_token_pairs-large-draft-medium.npz``, ``report-draft-medium.json``).

Run: ``.venv/bin/python scripts/train_pair.py`` (``--help`` for sizes and steps). Deterministic for a
given seed and thread count; re-running reuses the cached tokenizer and models unless ``--retrain``.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

VERSE_REFERENCE = re.compile(r"^\S+?\d+:\d+ ")  # "Ge1:1 " in front of every verse printed by `bible -f`
SIZES = {  # Llama configurations: the target costs about 7x the draft per token
    "target": dict(hidden_size=192, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
                   num_key_value_heads=4),
    "draft": dict(hidden_size=96, intermediate_size=256, num_hidden_layers=1, num_attention_heads=2,
                  num_key_value_heads=2),
    # --size large: a target of about 27 M parameters, whose forward pass dominates the draft's even
    # on a CPU (the small pair's passes cost about the same: framework overhead)
    "large-target": dict(hidden_size=512, intermediate_size=1408, num_hidden_layers=8, num_attention_heads=8,
                         num_key_value_heads=8),
    # --draft-size medium: a 2.1 M-parameter draft, about 10x cheaper per token than the large target
    # on this CPU (0.9 against 8.7 ms per decoding step), the ratio of e.g. a 1 B draft for an 8 B target
    "medium-draft": dict(hidden_size=256, intermediate_size=704, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=4),
}


def read_corpus() -> list:
    """The verses of the King James Bible (31,102 lines of text), from Debian's ``bible`` program."""
    if shutil.which("bible") is None:
        sys.exit("the corpus comes from Debian's bible-kjv packages: run `apt-get install -y bible-kjv` first")
    text = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True, capture_output=True, text=True).stdout
    verses = [VERSE_REFERENCE.sub("", line).strip() for line in text.splitlines()]
    return [v for v in verses if v]


def train_tokenizer(verses, vocab_size: int, path: Path) -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(verses, trainer)
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>",
                                      pad_token="<|endoftext|>")
    wrapped.save_pretrained(path)
    return wrapped


def encode(tokenizer, verses) -> np.ndarray:
    """One token stream: each verse followed by the end-of-text token."""
    eos = tokenizer.eos_token_id
    ids = []
    for encoding in tokenizer(verses)["input_ids"]:
        ids.extend(encoding)
        ids.append(eos)
    return np.array(ids, dtype=np.int64)


def make_model(size: str, vocab_size: int, context: int, eos: int) -> LlamaForCausalLM:
    """A fresh Llama of configuration ``SIZES[size]``."""
    config = LlamaConfig(vocab_size=vocab_size, max_position_embeddings=context, tie_word_embeddings=True,
                         bos_token_id=eos, eos_token_id=eos, pad_token_id=eos, **SIZES[size])
    return LlamaForCausalLM(config)


def batches(stream: np.ndarray, batch: int, context: int, rng: np.random.Generator):
    while True:
        starts = rng.integers(0, len(stream) - context - 1, size=batch)
        yield torch.as_tensor(np.stack([stream[s: s + context] for s in starts]))


def train(model, stream, steps: int, batch: int, context: int, lr: float, seed: int, log, teacher=None) -> float:
    """AdamW with linear warm-up and cosine decay on random windows; returns seconds.

    With a ``teacher`` the model is distilled: its loss is the cross-entropy of its next-token law
    against the teacher's full law at every position (the KL divergence up to the teacher's
    entropy), so the draft learns the target's distribution rather than the corpus's, as the
    drafters of real pairs are trained."""
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1, betas=(0.9, 0.95))
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    model.train()
    start = time.perf_counter()
    for step, ids in zip(range(steps), batches(stream, batch, context, np.random.default_rng(seed))):
        if teacher is None:
            loss = model(input_ids=ids, labels=ids).loss
        else:
            with torch.no_grad():
                teacher_law = torch.softmax(teacher(input_ids=ids).logits.float(), dim=-1)
            log_law = torch.log_softmax(model(input_ids=ids).logits.float(), dim=-1)
            loss = -(teacher_law * log_law).sum(-1).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 50 == 0 or step == steps - 1:
            log(f"  step {step:5d}/{steps}  loss {loss.item():.3f}  {time.perf_counter() - start:.0f} s")
    model.eval()
    return time.perf_counter() - start


@torch.inference_mode()
def perplexity(model, stream: np.ndarray, context: int) -> float:
    """Held-out perplexity over non-overlapping windows of the stream."""
    windows = torch.as_tensor(stream[: len(stream) // context * context].reshape(-1, context))
    total, count = 0.0, 0
    for chunk in windows.split(32):
        loss = model(input_ids=chunk, labels=chunk).loss
        total += loss.item() * chunk.numel()
        count += chunk.numel()
    return math.exp(total / count)


@torch.inference_mode()
def next_token_pairs(target, draft, stream: np.ndarray, count: int, context: int, seed: int):
    """Target and draft logits at ``count`` held-out contexts: every position >= 8 of random windows."""
    rng = np.random.default_rng(seed)
    per_window = context - 8
    starts = rng.integers(0, len(stream) - context, size=math.ceil(count / per_window))
    ids = torch.as_tensor(np.stack([stream[s: s + context] for s in starts]))
    target_logits = target(input_ids=ids).logits[:, 8:].reshape(-1, target.config.vocab_size)[:count]
    draft_logits = draft(input_ids=ids).logits[:, 8:].reshape(-1, draft.config.vocab_size)[:count]
    return target_logits.float().numpy(), draft_logits.double().numpy()


def softmax64(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    z = np.exp(z - z.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data"), help="cache directory (default data/)")
    parser.add_argument("--vocab", type=int, default=2048, help="BPE vocabulary size (default 2048)")
    parser.add_argument("--context", type=int, default=128, help="training window in tokens (default 128)")
    parser.add_argument("--batch", type=int, default=32, help="windows per step (default 32)")
    parser.add_argument("--target-steps", type=int, default=600, help="target training steps (default 600)")
    parser.add_argument("--draft-steps", type=int, default=400, help="draft training steps (default 400)")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (default 3e-3)")
    parser.add_argument("--draft-size", choices=("small", "medium"), default="small",
                        help="draft size: small (0.3 M parameters, saved as draft/) or medium (2.1 M, saved as "
                        "draft-medium/)")
    parser.add_argument("--distill", action="store_true",
                        help="distil the draft from the trained target (soft targets) instead of training it on "
                        "the corpus; the report records which")
    parser.add_argument("--pairs", type=int, default=4096, help="contexts in the exported dataset (default 4096)")
    parser.add_argument("--max-verses", type=int, help="use only the first N verses (quick smoke runs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: on cores shared with other work, 2 threads ran 4-7x "
                        "slower per step than 1 here)")
    parser.add_argument("--retrain", action="store_true", help="ignore cached tokenizer and models")
    parser.add_argument("--size", choices=("small", "large"), default="small",
                        help="target size: small (2.2 M parameters, data/pair) or large (27 M, data/pair-large, "
                        "data/next_token_pairs-large.npz)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    log = lambda message: print(message, flush=True)
    suffix = "" if args.size == "small" else "-large"
    pair_dir = args.out / f"pair{suffix}"
    configs = {"target": "target" if args.size == "small" else "large-target",
               "draft": "draft" if args.draft_size == "small" else "medium-draft"}
    draft_name = "draft" if args.draft_size == "small" else "draft-medium"
    pair_dir.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()

    verses = read_corpus()[: args.max_verses]
    held_out = len(verses) // 20  # every 20th verse is held out for perplexity and the dataset
    train_verses = [v for i, v in enumerate(verses) if i % 20]
    test_verses = verses[::20]
    tokenizer_dir = pair_dir / "tokenizer"
    if args.retrain or not (tokenizer_dir / "tokenizer.json").exists():
        log(f"training a {args.vocab}-token BPE tokenizer on {len(verses)} verses")
        tokenizer = train_tokenizer(train_verses, args.vocab, tokenizer_dir)
    else:
        tokenizer = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
    train_stream, test_stream = encode(tokenizer, train_verses), encode(tokenizer, test_verses)
    V = len(tokenizer)
    log(f"corpus: {len(train_stream)} training tokens, {len(test_stream)} held-out tokens, V = {V}")

    report = {"corpus": "King James Bible (Debian bible-kjv-text), public domain", "verses": len(verses),
              "held_out_verses": held_out, "train_tokens": int(len(train_stream)),
              "held_out_tokens": int(len(test_stream)), "vocab_size": V, "seed": args.seed,
              "threads": args.threads, "context": args.context, "batch": args.batch, "lr": args.lr,
              "draft_distilled": args.distill}
    trained = {}
    for index, (role, steps) in enumerate((("target", args.target_steps), ("draft", args.draft_steps))):
        path = pair_dir / (draft_name if role == "draft" else role)
        if args.retrain or not (path / "config.json").exists():
            torch.manual_seed(args.seed + index)
            model = make_model(configs[role], V, args.context, tokenizer.eos_token_id)
            log(f"training the {role}: {parameters(model):,} parameters, {steps} steps")
            teacher = trained["target"] if role == "draft" and args.distill else None
            seconds = train(model, train_stream, steps, args.batch, args.context, args.lr, args.seed + index, log,
                            teacher=teacher)
            model.save_pretrained(path)
            report[f"{role}_train_seconds"] = round(seconds, 1)
        else:
            model = LlamaForCausalLM.from_pretrained(path).eval()
            log(f"{role}: reusing {path}")
        trained[role] = model
        report[f"{role}_parameters"] = parameters(model)
        report[f"{role}_config"] = SIZES[configs[role]]
        report[f"{role}_held_out_perplexity"] = round(perplexity(model, test_stream, args.context), 3)
        log(f"{role}: held-out perplexity {report[f'{role}_held_out_perplexity']}")

    target_logits, draft_logits = next_token_pairs(trained["target"], trained["draft"], test_stream,
                                                   args.pairs, args.context, args.seed)
    p, q = softmax64(target_logits), softmax64(draft_logits)
    report["pairs"] = int(len(p))
    report["mean_single_draft_acceptance"] = round(float(np.minimum(p, q).sum(axis=1).mean()), 4)
    report["total_seconds"] = round(time.perf_counter() - began, 1)
    meta = {k: (json.dumps(v) if isinstance(v, dict) else v) for k, v in report.items()}
    variant = suffix + ("" if args.draft_size == "small" else "-draft-medium")
    dataset_path = args.out / f"next_token_pairs{variant}.npz"
    np.savez_compressed(dataset_path, p=p, q=q, target_logits=target_logits,
                        token_counts=np.bincount(train_stream, minlength=V).astype(np.int64),
                        meta=np.array(json.dumps(meta)))
    report_path = pair_dir / ("report.json" if args.draft_size == "small" else "report-draft-medium.json")
    report_path.write_text(json.dumps(report, indent=2) + "\n")
    log(json.dumps(report, indent=2))
    log(f"wrote {dataset_path} ({len(p)} contexts) and {report_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
