#!/usr/bin/env python3
"""Golden data for the full-size parity test (tests/gpu/test_parity_7b.cpp): the random
`cosmos-reason1-7b` test model run by Hugging Face transformers in bfloat16 on the GPU, with a
float32 pass over the same token sequences for context (how far bf16 HF itself is from fp32).
Runs on the GPU machine (tests/gpu/run.sh --parity-7b); the output is committed as
tests/data/golden_7b_bf16.json.

  make_golden_7b.py --model DIR --tokenizer tokenizer.json --seed S --out golden_7b_bf16.json

DIR comes from `cosmos-cli make-test-model --preset cosmos-reason1-7b --seed S`; --seed must be the
seed it was made with (checked against the first weights of model.embed_tokens.weight, computed
with the generator described in engine/include/cosmos/test_model.h).

For each case (a fixed prompt, ids from the HF `tokenizers` encoding of the test tokenizer, as
make_golden.py builds them):
  1. bf16 greedy generation, 256 new tokens: model.generate with use_cache, do_sample=False,
     repetition penalty 1.0 and no end-of-sequence token (the model's generation_config.json asks
     for sampling and a 1.05 penalty, so it is replaced); every chosen token is checked to be the
     argmax of the step's raw logits;
  2. bf16 teacher forcing: one forward over prompt + the 256 generated ids; for every position the
     top-20 ids and their logits (bf16 values, written exactly);
  3. the model converted to float32 (exact: the weights are bf16 values; TF32 off): the same
     teacher-forced forward, its logits at the bf16 top-20 ids and its own argmax; and a float32
     greedy generation of 256 tokens from the same prompt.

Output JSON (compact; about 0.5 MB):
{
  "format": "cosmos-golden-7b/1", "preset": "cosmos-reason1-7b", "seed": S, "steps": 256, "top_k": 20,
  "transformers_version", "torch_version", "gpu", "attn_implementation",
  "loading_info": {"missing_keys": [], "unexpected_keys": [], "mismatched_keys": [], ...},
  "summary": {...measured numbers, see summarize()...},
  "cases": [{
    "name", "prompt", "prompt_ids": [L],
    "generated": [256]        HF bf16 greedy tokens (the reference the test's top-1 agreement uses)
    "generated_fp32": [256]   HF fp32 greedy tokens (context only)
    "top_ids": [T][20]        bf16 teacher-forced top-20 ids at each position, T = L + 256;
                              position p predicts token p + 1 of prompt_ids + generated
    "bf16_logits": [T][20]    HF bf16 logits at top_ids (fp32 values of bf16 numbers, descending)
    "fp32_logits": [T][20]    HF fp32 logits at the same ids (rounded to 1e-5)
    "fp32_top1": [T]          HF fp32 argmax at each position
  }]
}
"""
import argparse
import json
import os
import sys
import time

STEPS = 256
TOP_K = 20
PROMPTS = [
    ("chat", "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
             "What should the robot do next?<|im_end|>\n<|im_start|>assistant\n<think>\n"),
    ("english", "The robot arm moves the red cup to the left of the plate, and then it"),
    ("mixed", "机器人把杯子放在桌子上。🤖 The car ahead is braking, so"),
]


# --- the weight generator of engine/src/test_model.cpp (embedding role), to check --seed ---
M64 = (1 << 64) - 1


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for c in s.encode():
        h = ((h ^ c) * 0x100000001B3) & M64
    return h


def splitmix64(z):
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & M64
    z ^= z >> 31
    return z


def embedding_value(seed, i):
    key = seed ^ fnv1a64("model.embed_tokens.weight")
    bits = splitmix64((key + (i + 1) * 0x9E3779B97F4A7C15) & M64)
    return (bits >> 40) / 8388608.0 - 1.0  # uniform [-1, 1); exact in fp32


def check_seed(model_dir, seed):
    import torch
    from safetensors import safe_open
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            wmap = json.load(f)["weight_map"]
        name = next(n for n in ("model.embed_tokens.weight", "model.language_model.embed_tokens.weight") if n in wmap)
        path = os.path.join(model_dir, wmap[name])
    else:
        path = os.path.join(model_dir, "model.safetensors")
        name = None
    with safe_open(path, "pt") as st:
        if name is None:
            name = next(n for n in st.keys() if n.endswith("embed_tokens.weight"))
        stored = st.get_slice(name)[0, :16].float()
    want = torch.tensor([embedding_value(seed, i) for i in range(16)], dtype=torch.float32).bfloat16().float()
    if not torch.equal(stored, want):
        sys.exit(f"{model_dir} was not made with --seed {seed}: embed_tokens[0,:4] = {stored[:4].tolist()}, "
                 f"expected {want[:4].tolist()}")


def greedy(model, ids, steps):
    """HF greedy generation (KV cache); returns the new ids, checked against the raw step logits."""
    import torch
    x = torch.tensor([ids], device="cuda")
    out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=steps, do_sample=False, num_beams=1,
                         repetition_penalty=1.0, use_cache=True, output_logits=True, return_dict_in_generate=True)
    new = out.sequences[0, len(ids):].tolist()
    if len(new) != steps:
        raise RuntimeError(f"generate returned {len(new)} tokens, expected {steps} (an end-of-sequence token?)")
    raw = [int(step_logits[0].float().argmax()) for step_logits in out.logits]
    bad = [s for s in range(steps) if raw[s] != new[s]]
    if bad:
        raise RuntimeError(f"generate chose tokens other than the raw argmax at steps {bad[:10]} (a logits processor?)")
    return new


def rel_err(a_rows, b_rows):
    """Per position: max_k |a - b| / max_k |b| over the 20 values (b: HF bf16 logits)."""
    out = []
    for a, b in zip(a_rows, b_rows):
        out.append(max(abs(x - y) for x, y in zip(a, b)) / max(max(abs(y) for y in b), 1e-30))
    return out


def first_divergence(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


def summarize(cases):
    """The numbers the test's bound comes from (also printed): HF bf16 against HF fp32."""
    s = {"cases": []}
    all_err = []
    for c in cases:
        L = len(c["prompt_ids"])
        err = rel_err(c["fp32_logits"], c["bf16_logits"])
        all_err += err
        steps = range(STEPS)
        gen = c["generated"]
        tf_bf16 = [c["top_ids"][L - 1 + t][0] for t in steps]
        tf_fp32 = [c["fp32_top1"][L - 1 + t] for t in steps]
        # top-1/top-2 margin of HF bf16 relative to its largest |logit| (near ties flip under rounding)
        margins = [(r[0] - r[1]) / max(abs(v) for v in r) for r in c["bf16_logits"][L - 1:L - 1 + STEPS]]
        srt = sorted(err)
        s["cases"].append({
            "name": c["name"], "prompt_tokens": L,
            "hf_bf16_vs_fp32_rel_err_max": max(err), "hf_bf16_vs_fp32_rel_err_mean": sum(err) / len(err),
            "hf_bf16_vs_fp32_rel_err_p99": srt[int(0.99 * (len(srt) - 1))],
            "fp32_teacher_forced_top1_agrees_with_bf16_greedy": sum(a == b for a, b in zip(tf_fp32, gen)),
            "bf16_teacher_forced_top1_agrees_with_bf16_greedy": sum(a == b for a, b in zip(tf_bf16, gen)),
            "bf16_margin_below_1pct_steps": sum(m < 0.01 for m in margins),
            "fp32_greedy_first_divergence_from_bf16": first_divergence(c["generated_fp32"], gen),
        })
    s["hf_bf16_vs_fp32_rel_err_max"] = max(all_err)
    s["hf_bf16_vs_fp32_rel_err_mean"] = sum(all_err) / len(all_err)
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="folder from cosmos-cli make-test-model --preset cosmos-reason1-7b")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--seed", type=int, required=True, help="the seed the model folder was made with")
    ap.add_argument("--out", required=True, help="output JSON (e.g. tests/data/golden_7b_bf16.json)")
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2_5_VLForConditionalGeneration
    t0 = time.time()
    check_seed(args.model, args.seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    tok = PreTrainedTokenizerFast(tokenizer_file=args.tokenizer)
    cases = [{"name": n, "prompt": p, "prompt_ids": tok(p, add_special_tokens=False)["input_ids"]} for n, p in PROMPTS]

    model, info = Qwen2_5_VLForConditionalGeneration.from_pretrained(
        args.model, dtype=torch.bfloat16, output_loading_info=True)
    info = {k: sorted(v) if isinstance(v, (list, set)) else str(v) for k, v in info.items()}
    print("loading info:", {k: len(v) for k, v in info.items()}, flush=True)
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        if info.get(key):
            sys.exit(f"{key}: {info[key][:10]}")
    model = model.to("cuda").eval()
    # Plain greedy decoding, nothing from the model folder's generation_config.json (sampling,
    # repetition penalty 1.05, end-of-sequence ids).
    model.generation_config = GenerationConfig(bos_token_id=151643, pad_token_id=151643, do_sample=False,
                                               repetition_penalty=1.0)
    attn = getattr(model.config, "_attn_implementation", None)
    print(f"loaded in {time.time() - t0:.1f} s ({attn} attention)", flush=True)

    with torch.no_grad():
        for c in cases:
            t = time.time()
            c["generated"] = greedy(model, c["prompt_ids"], STEPS)
            seq = torch.tensor([c["prompt_ids"] + c["generated"]], device="cuda")
            logits = model(input_ids=seq).logits[0].float()  # [T, vocab]: fp32 values of bf16 logits
            top = torch.topk(logits, TOP_K, dim=-1)  # descending; ties keep the lower id first
            c["top_ids"] = top.indices.tolist()
            c["bf16_logits"] = top.values.tolist()
            c["_seq"] = seq
            print(f"bf16 {c['name']}: {len(c['prompt_ids'])} prompt tokens, {STEPS} steps in {time.time() - t:.1f} s",
                  flush=True)
        model = model.to(torch.float32)
        for c in cases:
            t = time.time()
            logits = model(input_ids=c.pop("_seq")).logits[0]
            ids = torch.tensor(c["top_ids"], device="cuda")
            c["fp32_logits"] = [[round(v, 5) for v in row] for row in torch.gather(logits, 1, ids).tolist()]
            c["fp32_top1"] = logits.argmax(dim=-1).tolist()
            c["generated_fp32"] = greedy(model, c["prompt_ids"], STEPS)
            print(f"fp32 {c['name']}: {time.time() - t:.1f} s", flush=True)

    order = ["name", "prompt", "prompt_ids", "generated", "generated_fp32", "top_ids", "bf16_logits",
             "fp32_logits", "fp32_top1"]
    cases = [{k: c[k] for k in order} for c in cases]
    result = {
        "format": "cosmos-golden-7b/1", "preset": "cosmos-reason1-7b", "seed": args.seed, "steps": STEPS,
        "top_k": TOP_K, "transformers_version": transformers.__version__, "torch_version": torch.__version__,
        "gpu": torch.cuda.get_device_name(0), "attn_implementation": attn, "loading_info": info,
        "summary": summarize(cases), "cases": cases,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, separators=(",", ":"))
    print(json.dumps(result["summary"], indent=1))
    print(f"wrote {args.out} ({os.path.getsize(args.out) / 1e6:.2f} MB) in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
