#!/usr/bin/env python3
"""Golden data from Hugging Face tools, for the parity tests. Runs on the GPU machine (it has
transformers, tokenizers, torch, jinja2); the outputs are committed under tests/data/.

  make_golden.py --tokenizer tokenizer.json --data tests/data --out OUTDIR
                 [--tiny-model DIR --tiny-model-lm DIR --seed N]

Writes to OUTDIR:
  tokenizer_golden.json   HF `tokenizers` ids of every string in tokenizer_cases.json
  chat_golden.json        transformers apply_chat_template (Qwen2.5-VL template) text + ids of chat_cases.json
  tiny_golden.json        (with --tiny-model) the tiny test model loaded by Qwen2_5_VLForConditionalGeneration:
                          missing/unexpected keys; per prompt, in fp32 and bf16: top-20 logits of every
                          position and 64 greedy tokens (repetition penalty 1.0 and 1.05)
  tiny_last_logits.f32    fp32 last-position logits of each tiny case, float32 little-endian [cases, vocab]
  transformers_saved_config.json / transformers_saved_tensors.json
                          config.json and tensor names as this transformers version re-saves the model
"""
import argparse
import hashlib
import json
import os
import sys


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def tokenizer_golden(args):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(args.tokenizer)
    with open(os.path.join(args.data, "tokenizer_cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    out = {"tokenizer_sha256": sha256(args.tokenizer), "cases": []}
    for text in cases:
        ids = tok.encode(text, add_special_tokens=False).ids
        out["cases"].append({"text": text, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
    with open(os.path.join(args.out, "tokenizer_golden.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    print(f"tokenizer_golden.json: {len(cases)} cases")


def chat_golden(args):
    from transformers import PreTrainedTokenizerFast
    with open(os.path.join(args.data, "qwen25vl_chat_template.jinja"), encoding="utf-8") as f:
        template = f.read()
    tok = PreTrainedTokenizerFast(tokenizer_file=args.tokenizer)
    tok.chat_template = template
    with open(os.path.join(args.data, "chat_cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    out = {"tokenizer_sha256": sha256(args.tokenizer), "cases": []}
    for c in cases:
        prompt = tok.apply_chat_template(c["messages"], tokenize=False,
                                         add_generation_prompt=c["add_generation_prompt"])
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        out["cases"].append({**c, "prompt": prompt, "ids": ids})
    with open(os.path.join(args.out, "chat_golden.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    print(f"chat_golden.json: {len(cases)} cases")


def tiny_golden(args):
    """The tiny model in float32 (the CPU reference's arithmetic; weights are bf16 values) and in
    bfloat16 (what the GPU backends run): top-20 logits of every position, the full last-position
    float32 logits, and 64 greedy tokens (without and with repetition penalty 1.05)."""
    import struct
    import tempfile
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration, PreTrainedTokenizerFast
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    tok = PreTrainedTokenizerFast(tokenizer_file=args.tokenizer)
    result = {"seed": args.seed, "steps": 64, "models": {}}
    for name, path in (("original", args.tiny_model), ("language_model", args.tiny_model_lm)):
        model, info = Qwen2_5_VLForConditionalGeneration.from_pretrained(
            path, dtype=torch.bfloat16, output_loading_info=True)
        result["models"][name] = {k: sorted(v) if isinstance(v, (list, set)) else str(v) for k, v in info.items()}
        print(name, "loading info:", {k: len(v) for k, v in info.items()})
    prompts = [
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
        "The robot arm moves the red cup to the left of the plate, then",
        "机器人把杯子放在桌子上。🤖",
        "<think>\nThe car ahead is braking.\n</think>\n\n<answer>\nSlow down",
    ]
    cases = [{"prompt": p, "ids": tok(p, add_special_tokens=False)["input_ids"]} for p in prompts]
    blobs = []
    for dtype_name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        m = model.to(dtype=dtype, device="cuda").eval()
        with torch.no_grad():
            for c in cases:
                x = torch.tensor([c["ids"]], device="cuda")
                logits = m(input_ids=x).logits[0].float()  # [positions, vocab]
                top = torch.topk(logits, 20, dim=-1)
                entry = {"top_ids": top.indices.tolist(), "top_logits": top.values.tolist()}
                for key, penalty in (("greedy", 1.0), ("greedy_penalty_1_05", 1.05)):
                    gen = m.generate(x, max_new_tokens=64, min_new_tokens=64, do_sample=False,
                                     repetition_penalty=penalty, pad_token_id=151643)
                    entry[key] = gen[0, len(c["ids"]):].tolist()
                c[dtype_name] = entry
                if dtype_name == "fp32":
                    blobs.append(logits[-1].cpu())
    result["cases"] = cases
    with open(os.path.join(args.out, "tiny_golden.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)
    with open(os.path.join(args.out, "tiny_last_logits.f32"), "wb") as f:
        for b in blobs:
            f.write(struct.pack(f"<{b.numel()}f", *b.tolist()))
    # How this transformers version re-saves the model (newer config form and tensor names).
    saved = tempfile.mkdtemp(prefix="resaved_")
    model.to(torch.bfloat16).save_pretrained(saved)
    with open(os.path.join(saved, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    with open(os.path.join(args.out, "transformers_saved_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=1)
    from safetensors import safe_open
    names = []
    for fn in sorted(os.listdir(saved)):
        if fn.endswith(".safetensors"):
            with safe_open(os.path.join(saved, fn), "pt") as st:
                names += list(st.keys())
    with open(os.path.join(args.out, "transformers_saved_tensors.json"), "w", encoding="utf-8") as f:
        json.dump(sorted(names), f, indent=0)
    print(f"tiny_golden.json: {len(cases)} cases; resaved {len(names)} tensors")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tiny-model")
    ap.add_argument("--tiny-model-lm")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    failed = False
    for step in (tokenizer_golden, chat_golden) + ((tiny_golden,) if args.tiny_model else ()):
        try:
            step(args)
        except Exception as e:  # keep going: each file is useful alone
            failed = True
            import traceback
            traceback.print_exc()
            print(f"{step.__name__} FAILED: {e}", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
