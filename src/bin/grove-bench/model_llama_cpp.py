"""llama.cpp on the same GGUF and prompt as `grove-bench model`, for comparison.

Usage:
    grove-bench model --model FILE --dump-prompt /tmp/prompt.json
    python3 model_llama_cpp.py FILE /tmp/prompt.json [--threads 2] [--gen 64] [--runs 3]

Needs llama-cpp-python (it compiles llama.cpp; see docs/model.md for the
build used). `grove-bench model` runs this script itself, interleaved with
its own runs. Prints load
time, prompt and generation tokens/s (greedy, stop tokens masked, median of
runs), peak RSS, and whether llama.cpp tokenizes the prompt text to the same
ids as grove.
"""

import argparse
import json
import resource
import statistics
import time

import numpy as np
from llama_cpp import Llama


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("prompt")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--gen", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    # llama.cpp's flash-attention path, as grove's context resolved it.
    parser.add_argument("--flash-attn", choices=["on", "off"], default="off")
    args = parser.parse_args()

    with open(args.prompt) as f:
        dump = json.load(f)
    ids, text, stops = dump["ids"], dump["text"], dump["stop"]

    started = time.perf_counter()
    llm = Llama(
        model_path=args.model,
        n_ctx=max(2048, len(ids) + args.gen + 8),
        n_threads=args.threads,
        n_threads_batch=args.threads,
        n_batch=512,
        flash_attn=args.flash_attn == "on",
        verbose=False,
    )
    load = time.perf_counter() - started

    theirs = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
    same = list(theirs) == list(ids)
    first_tokens = []

    vocab = llm.n_vocab()
    prompt_rates, gen_rates = [], []
    for _ in range(args.runs):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        t1 = time.perf_counter()
        for _ in range(args.gen):
            # The last evaluated position's logits, straight from llama.cpp
            # (llama-cpp-python keeps `scores` only with logits_all).
            logits = np.array(
                np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(vocab,)),
                copy=True,
            )
            logits[stops] = -np.inf
            token = int(np.argmax(logits))
            if len(first_tokens) < args.gen:
                first_tokens.append(token)
            llm.eval([token])
        t2 = time.perf_counter()
        prompt_rates.append(len(ids) / (t1 - t0))
        gen_rates.append(args.gen / (t2 - t1))

    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"llama.cpp: {args.model} threads={args.threads}")
    print(f"load: {load:.3f} s")
    print(f"tokenizer ids equal grove's: {same} ({len(ids)} vs {len(theirs)})")
    print(f"prompt: {len(ids)} tokens, {statistics.median(prompt_rates):.1f} tok/s (median of {args.runs})")
    print(f"generation: {args.gen} tokens, {statistics.median(gen_rates):.1f} tok/s (median of {args.runs})")
    print(f"peak RSS: {peak_mb:.0f} MB")
    print(f"tokens: {json.dumps(first_tokens)}")
    print(f"sample: {llm.detokenize(first_tokens).decode('utf-8', 'replace')[:160]!r}")


if __name__ == "__main__":
    main()
