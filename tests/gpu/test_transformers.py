"""tests/gpu/test_transformers.py - fa4 as transformers' attention (issue 27 item 3; tests/gpu/pyapi.sh runs it).

fa4_torch.register_transformers() registers "fa4"; small Llama- and Qwen2-shaped models with random weights (no
download; bf16 on the GPU) run with attn_implementation "eager", "sdpa" and "fa4" on the same weights:
  - logits of a prompt batch (prefill): rel L2 of fa4 vs eager must be within the SDPA-vs-eager difference of the
    same run (x 1.25, the bf16 noise between two correct implementations), and fa4 vs sdpa likewise;
  - greedy generation of 32 tokens with the dynamic cache (decode: Sq = 1 against the cache, bottom-right causal,
    GQA): fa4's tokens must equal sdpa's, or first differ no earlier than eager's do from sdpa's (near-ties);
  - Qwen2 with sliding-window layers (window 16 < the prompt's 64 tokens) and Llama with GQA 8/2.
Without transformers it prints why and passes (CI has none). Prints one line per check and
'transformers: N passed, N failed'.
"""
import os
import sys

try:
    import transformers
except ImportError as e:
    print("transformers: skipped (transformers is not installed: %s); 0 passed, 0 failed" % e)
    print("transformers: 0 passed, 0 failed")
    sys.exit(0)
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import fa4  # noqa: E402
import fa4_torch  # noqa: E402

passed = failed = 0


def report(name, ok, detail=""):
    global passed, failed
    passed += bool(ok)
    failed += not ok
    print("%s %-62s %s" % ("ok  " if ok else "FAIL", name, detail), flush=True)


def set_impl(model, name):
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(name)
    else:
        model.config._attn_implementation = name


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def first_diff(a, b):
    d = (a != b).nonzero()
    return int(d[0, -1]) if len(d) else a.shape[-1]


def run_model(title, model, vocab, prompt_len=64, batch=2, new=32):
    torch.manual_seed(1)
    ids = torch.randint(0, vocab, (batch, prompt_len), device="cuda")
    logits, gen = {}, {}
    for impl in ("eager", "sdpa", "fa4"):
        set_impl(model, impl)
        with torch.no_grad():
            logits[impl] = model(ids).logits.float()
            gen[impl] = model.generate(ids, max_new_tokens=new, do_sample=False, min_new_tokens=new,
                                       pad_token_id=0)[:, prompt_len:]
    base = rel(logits["sdpa"], logits["eager"])
    fe, fs = rel(logits["fa4"], logits["eager"]), rel(logits["fa4"], logits["sdpa"])
    tol = 1.25 * base
    report("%s: prefill logits fa4 vs eager within sdpa vs eager" % title, fe <= tol,
           "fa4-eager %.3e, sdpa-eager %.3e" % (fe, base))
    report("%s: prefill logits fa4 vs sdpa within sdpa vs eager" % title, fs <= tol,
           "fa4-sdpa %.3e, sdpa-eager %.3e" % (fs, base))
    fd, ed = first_diff(gen["fa4"], gen["sdpa"]), first_diff(gen["eager"], gen["sdpa"])
    report("%s: greedy %d tokens, fa4 vs sdpa" % (title, new), gen["fa4"].shape[-1] == new and (fd == new or fd >= ed),
           "first difference at token %d of %d (eager vs sdpa: %d)" % (fd, new, ed))


def main():
    print("torch %s, transformers %s, %s, fa4 %s" % (torch.__version__, transformers.__version__,
                                                   torch.cuda.get_device_name(), fa4.version()), flush=True)
    report("register_transformers() -> 'fa4'", fa4_torch.register_transformers() == "fa4")
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=1024, hidden_size=512, intermediate_size=1024, num_hidden_layers=2,
                      num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=1024,
                      initializer_range=0.05)
    try:
        model = LlamaForCausalLM(cfg).to("cuda", torch.bfloat16).eval()
        run_model("llama GQA 8/2 d64", model, cfg.vocab_size)
    except Exception as ex:  # noqa: BLE001
        report("llama", False, "%s: %s" % (type(ex).__name__, str(ex)[:600]))
    torch.manual_seed(0)
    qcfg = Qwen2Config(vocab_size=1024, hidden_size=512, intermediate_size=1024, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                       use_sliding_window=True, sliding_window=16, max_window_layers=1,
                       layer_types=["full_attention", "sliding_attention"], initializer_range=0.05)
    try:
        model = Qwen2ForCausalLM(qcfg).to("cuda", torch.bfloat16).eval()
        run_model("qwen2 d128, sliding window 16 (layer 1)", model, qcfg.vocab_size)
    except Exception as ex:  # noqa: BLE001
        report("qwen2", False, "%s: %s" % (type(ex).__name__, str(ex)[:600]))
    print("transformers: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
