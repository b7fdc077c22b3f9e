"""Writes notebooks/hf_generation.ipynb from its cell sources (run: python notebooks/make_hf_notebook.py).

The test suite executes the notebook with MULTIDRAFT_NOTEBOOK_QUICK=1 on tiny random models
(tests/docs/test_notebooks.py); without it, the trained pair of scripts/train_pair.py is used when present.
"""

from make_notebooks import write_notebook
from nbformat.v4 import new_code_cell, new_markdown_cell


CELLS = [
    new_markdown_cell(
        "# Multi-draft speculative sampling in a `transformers` generation loop\n\n"
        "`target.generate(..., custom_generate=multidraft.hf.decode, draft_model=draft)` drafts `n` sequences "
        "of `L` tokens with a small draft model, scores them with ONE target forward pass, and verifies them "
        "position by position with any verifier of the registry, so the output is distributed exactly as "
        "`target.generate` would sample it (its logits processors and stopping criteria included). This notebook "
        "compares verifiers and `n` by **tokens per target forward pass** and **wall time**, against plain "
        "target sampling and against `transformers`' own assisted generation (`assistant_model=`).\n\n"
        "Models: the pair trained by `scripts/train_pair.py` (King James Bible, BPE vocabulary of 2048): the "
        "27 M-parameter target of `--size large` with its distilled medium draft when `data/pair-large/` exists "
        "(else its small draft), else the 2.2 M-parameter target of `data/pair/`; otherwise (and always under `MULTIDRAFT_NOTEBOOK_QUICK=1`, as in the test "
        "suite) tiny random Llama models built from configs, whose numbers mean nothing but keep the "
        "notebook runnable."
    ),
    new_code_cell(
        "import os, pathlib, time\n"
        "import numpy as np\n"
        "import torch\n"
        "import matplotlib.pyplot as plt\n"
        "from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast\n"
        "import multidraft as md\n"
        "from multidraft import hf\n\n"
        "QUICK = os.environ.get('MULTIDRAFT_NOTEBOOK_QUICK') == '1'\n"
        "DATA_DIR = pathlib.Path('..') / 'data'\n"
        "PAIR = next((DATA_DIR / d for d in ('pair-large', 'pair') if (DATA_DIR / d / 'target').is_dir()), None)\n"
        "torch.set_num_threads(1 if QUICK else 2)\n"
        "if not QUICK and PAIR is not None:\n"
        "    tokenizer = PreTrainedTokenizerFast.from_pretrained(PAIR / 'tokenizer')\n"
        "    target = AutoModelForCausalLM.from_pretrained(PAIR / 'target').eval()\n"
        "    DRAFT = 'draft-medium' if (PAIR / 'draft-medium').is_dir() else 'draft'\n"
        "    draft = AutoModelForCausalLM.from_pretrained(PAIR / DRAFT).eval()\n"
        "    prompt = tokenizer('And God said unto Moses,', return_tensors='pt').input_ids\n"
        "    NEW_TOKENS, REPEATS = 64, 5\n"
        "else:\n"
        "    tokenizer = None\n"
        "    def tiny(seed, layers, hidden):\n"
        "        torch.manual_seed(seed)\n"
        "        config = LlamaConfig(vocab_size=64, hidden_size=hidden, intermediate_size=2 * hidden,\n"
        "                             num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=2,\n"
        "                             max_position_embeddings=256, bos_token_id=0, eos_token_id=0, pad_token_id=0)\n"
        "        return LlamaForCausalLM(config).eval()\n"
        "    target, draft = tiny(0, 2, 64), tiny(1, 1, 32)\n"
        "    prompt = torch.tensor([[1, 2, 3, 4]])\n"
        "    NEW_TOKENS, REPEATS = 12, 1\n"
        "size = lambda m: sum(p.numel() for p in m.parameters())\n"
        "print(f'target {size(target):,} parameters, draft {size(draft):,}, vocabulary {target.config.vocab_size}')"
    ),
    new_markdown_cell(
        "## Baselines: plain target sampling and `transformers` assisted generation\n\n"
        "A forward hook counts the target's forward passes. Plain sampling makes one per token; assisted "
        "generation (single draft, `transformers`' own speculative sampling) makes fewer. Every run "
        "generates exactly `NEW_TOKENS` tokens (`min_new_tokens`, a logits processor that `decode` honours too)."
    ),
    new_code_cell(
        "calls = {'n': 0}\n"
        "target.register_forward_hook(lambda *_: calls.__setitem__('n', calls['n'] + 1))\n\n"
        "def timed(run):\n"
        "    '''One untimed warm-up run, then REPEATS runs: median wall time, target passes, outputs.'''\n"
        "    run(REPEATS)\n"
        "    seconds, outputs = [], []\n"
        "    calls['n'] = 0\n"
        "    for i in range(REPEATS):\n"
        "        start = time.perf_counter()\n"
        "        outputs.append(run(i))\n"
        "        seconds.append(time.perf_counter() - start)\n"
        "    return float(np.median(seconds)), calls['n'], outputs\n\n"
        "common = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=True, pad_token_id=0,\n"
        "              attention_mask=torch.ones_like(prompt))\n"
        "rows = []\n"
        "plain_s, plain_calls, _ = timed(lambda i: target.generate(prompt, **common))\n"
        "rows.append(('plain target sampling', 1, REPEATS * NEW_TOKENS / plain_calls, plain_s))\n"
        "assisted_s, assisted_calls, _ = timed(lambda i: target.generate(prompt, assistant_model=draft, **common))\n"
        "rows.append(('transformers assisted', 1, REPEATS * NEW_TOKENS / assisted_calls, assisted_s))\n"
        "for row in rows:\n"
        "    print(f'{row[0]:24} tokens/target pass {row[2]:.2f}   wall {row[3]:.3f} s')"
    ),
    new_markdown_cell(
        "## Every verifier, n in {1, 2, 4}, draft length 4\n\n"
        "`multidraft.hf.decode` runs inside `target.generate` with the same arguments as the baselines; "
        "`return_dict_in_generate=True` adds its statistics (`out.multidraft`). "
        "`tokens_per_target_pass` counts generated tokens per target forward pass; the time split "
        "shows where the wall time goes (draft model and draft sampling, target pass, verification). "
        "Drafts come from the draft's 16 most probable tokens (`draft_top_k`: the verifier sees the same "
        "truncated draft law and the target is untouched, so the output law does not change), which keeps "
        "the exact optimal-transport verifiers cheap at a real vocabulary. Both models keep their KV caches "
        "across rounds (one row per prompt, the drafts as chains under a 4-D attention mask, the accepted "
        "chain kept); the next cell measures re-encoding every round instead (`kv_cache=False` of the "
        "lower-level `hf.generate`, same loop)."
    ),
    new_code_cell(
        "DRAFT_TOP_K = 16  # drafts from the draft's 16 most probable tokens: exact verifiers stay cheap\n"
        "CONFIGS = [(name, n) for name in md.verifier_names() for n in (1, 2, 4)\n"
        "           if md.verifier(name).fixed_n in (None, n)]\n"
        "if QUICK:\n"
        "    CONFIGS = [('sps', 1), ('otlp', 2), ('spechub', 2), ('rrs_without_replacement', 4)]\n"
        "results = {}\n"
        "for name, n in CONFIGS:\n"
        "    seconds, _, outputs = timed(lambda i: target.generate(\n"
        "        prompt, custom_generate=hf.decode, draft_model=draft, num_drafts=n, draft_length=4, verifier=name,\n"
        "        seed=i, draft_top_k=DRAFT_TOP_K, return_dict_in_generate=True, **common))\n"
        "    stats = [o.multidraft for o in outputs]  # summed over the REPEATS runs\n"
        "    per_pass = sum(s.new_tokens for s in stats) / sum(s.row_rounds for s in stats)\n"
        "    acceptance = sum(s.accepted for s in stats) / np.maximum(sum(s.reached for s in stats), 1)\n"
        "    split = [np.median([getattr(s, f'{part}_seconds') for s in stats]) for part in ('draft', 'target', 'verify')]\n"
        "    results[name, n] = per_pass, seconds, acceptance\n"
        "    rows.append((name, n, per_pass, seconds))\n"
        "    print(f'{name:24} n={n}  tokens/target pass {per_pass:.2f}  wall {seconds:.3f} s  '\n"
        "          f'(draft {split[0]:.3f}, target {split[1]:.3f}, verify {split[2]:.3f})  '\n"
        "          f'acceptance per position {np.round(acceptance, 2)}')"
    ),
    new_markdown_cell(
        "## Out-of-vocabulary drafts: the draft head pruned to a quarter of the vocabulary\n\n"
        "`hf.prune_draft_head` keeps the LM-head rows of the most frequent tokens ([OOV]'s frequency-ranked "
        "pruning; the input embeddings stay whole), and `vocabulary_map=` lays the pruned draft logits over the "
        "target ids (TLI): drafts never propose a pruned token, the verifier sees the law they were drawn "
        "from, and the output is still exactly the target's. Token counts come from the trained pair's data "
        "set (`data/next_token_pairs.npz`, `-large` for the large pair) when present, else from the target's own "
        "samples."
    ),
    new_code_cell(
        "DATA = DATA_DIR / ('next_token_pairs-large.npz' if PAIR is not None and PAIR.name == 'pair-large'\n"
        "                   else 'next_token_pairs.npz')\n"
        "V = target.get_output_embeddings().weight.shape[0]\n"
        "if tokenizer is not None and DATA.exists():\n"
        "    counts = np.load(DATA)['token_counts']\n"
        "else:\n"
        "    sample = target.generate(prompt, max_new_tokens=64, do_sample=True, pad_token_id=0,\n"
        "                             attention_mask=torch.ones_like(prompt))\n"
        "    counts = np.bincount(sample.ravel().numpy(), minlength=V)  # ties: the lower id first\n"
        "pruned, vmap = hf.prune_draft_head(draft, counts, keep=V // 4)\n"
        "for name, n in [('sps', 1), ('otlp', 2)]:\n"
        "    seconds, _, outputs = timed(lambda i: target.generate(\n"
        "        prompt, custom_generate=hf.decode, draft_model=pruned, vocabulary_map=vmap, num_drafts=n,\n"
        "        draft_length=4, verifier=name, seed=i, draft_top_k=DRAFT_TOP_K, return_dict_in_generate=True,\n"
        "        **common))\n"
        "    stats = [o.multidraft for o in outputs]\n"
        "    per_pass = sum(s.new_tokens for s in stats) / sum(s.row_rounds for s in stats)\n"
        "    rows.append((f'{name} (head 25%)', n, per_pass, seconds))\n"
        "    print(f'{name:4} n={n}, draft head {V // 4} of {V} rows: tokens/target pass {per_pass:.2f}  '\n"
        "          f'wall {seconds:.3f} s (full head: {results[name, n][0]:.2f})')"
    ),
    new_code_cell(
        "labels = [f'{name} n={n}' if i >= 2 else name for i, (name, n, _, _) in enumerate(rows)]\n"
        "fig, axes = plt.subplots(1, 2, figsize=(12, 0.35 * len(rows) + 1.5), sharey=True)\n"
        "colors = ['gray', 'tab:orange'] + ['tab:blue'] * (len(rows) - 2)\n"
        "axes[0].barh(labels, [r[2] for r in rows], color=colors)\n"
        "axes[0].set_xlabel('tokens per target forward pass (higher is better)')\n"
        "axes[1].barh(labels, [plain_s / r[3] for r in rows], color=colors)\n"
        "axes[1].axvline(1.0, color='k', lw=0.8)\n"
        "axes[1].set_xlabel('wall-time speed-up over plain target sampling')\n"
        "axes[0].invert_yaxis()\n"
        "plt.tight_layout()"
    ),
    new_markdown_cell("## KV caches kept across rounds against re-encoding every round"),
    new_code_cell(
        "for kv_cache in (True, False):\n"
        "    seconds, _, outputs = timed(lambda i: hf.generate(target, draft, prompt, NEW_TOKENS, num_drafts=4,\n"
        "                                                     verifier='otlp', seed=i, draft_top_k=DRAFT_TOP_K,\n"
        "                                                     kv_cache=kv_cache))\n"
        "    s = outputs[0].stats\n"
        "    print(f'kv_cache={kv_cache!s:5}  wall {seconds:.3f} s  target {s.target_seconds:.3f} s  '\n"
        "          f'draft {s.draft_seconds:.3f} s  tokens/target pass {s.tokens_per_target_pass:.2f}  '\n"
        "          f'target positions per round {s.target_positions / s.row_rounds:.1f}')"
    ),
    new_markdown_cell("## `do_sample=False` reproduces `target.generate` token for token"),
    new_code_cell(
        "greedy = target.generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0,\n"
        "                         attention_mask=torch.ones_like(prompt))\n"
        "ours = target.generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0,\n"
        "                       attention_mask=torch.ones_like(prompt), custom_generate=hf.decode, draft_model=draft,\n"
        "                       num_drafts=2, verifier='otlp')\n"
        "assert torch.equal(ours, greedy)  # stops at the same end-of-text token, token for token\n"
        "if tokenizer is not None:\n"
        "    print(tokenizer.decode(ours[0]))\n"
        "    sampled = target.generate(prompt, custom_generate=hf.decode, draft_model=draft, num_drafts=4,\n"
        "                              verifier='otlp', seed=0, draft_top_k=DRAFT_TOP_K, **common)\n"
        "    print(tokenizer.decode(sampled[0]))"
    ),
]


def main():
    write_notebook(CELLS, "hf_generation.ipynb")


if __name__ == "__main__":
    main()
