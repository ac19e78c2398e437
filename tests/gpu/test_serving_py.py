"""tests/gpu/test_serving_py.py - the Python binding's serving calls on a GPU (tests/gpu/run.sh --only-serving).

A decode batch as a serving engine holds it: variable query lengths (1..16 tokens per sequence, cu_seqlens_q),
variable kv lengths, GQA 32/8, d128, causal (bottom-right per sequence), K/V dense (cu_seqlens_k) or in
shuffled 64-row pages (block_table, seqlen_k). Each call goes through fa4.mha_fwd with split-KV: the count
the runtime picks (workspace sized by fa4.mha_split_count with the same varlen/paged keywords), a forced
count, and one split without a workspace. Every sequence's O and LSE are compared with an fp32 reference
of that sequence alone; rows of no sequence (after the last one) must keep their poison.
Prints one line per check and 'serving py: N passed, N failed'.
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import torch  # noqa: E402

import fa4  # noqa: E402

passed = failed = 0
PAGE, HQ, HK, D, TAIL = 64, 32, 8, 128, 3


def check(name, cond, detail=""):
    global passed, failed
    print("%s %s %s" % ("ok  " if cond else "FAIL", name, detail), flush=True)
    passed += bool(cond)
    failed += not cond


def reference(q, k, v):
    """fp32 causal (bottom-right) attention of one sequence: q [sq, H, D], k, v [sk, Hk, D]; O and lse [H, sq]."""
    sq, sk = q.shape[0], k.shape[0]
    qf = q.float().transpose(0, 1)
    kf = k.float().repeat_interleave(HQ // HK, dim=1).transpose(0, 1)
    vf = v.float().repeat_interleave(HQ // HK, dim=1).transpose(0, 1)
    s = qf @ kf.transpose(-1, -2) / math.sqrt(D)
    i = torch.arange(sq, device=q.device)[:, None]
    j = torch.arange(sk, device=q.device)[None, :]
    s = s.masked_fill(j > i + sk - sq, float("-inf"))
    return (torch.softmax(s, dim=-1) @ vf).transpose(0, 1), torch.logsumexp(s, dim=-1)


def main():
    dev = torch.device("cuda")
    torch.manual_seed(1)
    lq, lk = [1, 1, 4, 16, 1, 7], [3000, 17000, 500, 9000, 1, 40000]
    cq = torch.tensor([0] + list(torch.tensor(lq).cumsum(0)), dtype=torch.int32, device=dev)
    ck = torch.tensor([0] + list(torch.tensor(lk).cumsum(0)), dtype=torch.int32, device=dev)
    total_q, total_k = sum(lq) + TAIL, sum(lk)
    q = torch.randn(total_q, HQ, D, device=dev, dtype=torch.bfloat16)
    k = torch.randn(total_k, HK, D, device=dev, dtype=torch.bfloat16)
    v = torch.randn(total_k, HK, D, device=dev, dtype=torch.bfloat16)
    refs = [reference(q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]]) for b in range(len(lq))]
    # the same K/V in shuffled pages: sequence b's page p at perm[first page of b + p]
    npages = [-(-n // PAGE) for n in lk]
    perm = torch.randperm(sum(npages), device=dev)
    kp = torch.zeros(sum(npages), PAGE, HK, D, device=dev, dtype=torch.bfloat16)
    vp = torch.zeros_like(kp)
    table = torch.full((len(lq), max(npages) + 1), -1, dtype=torch.int32, device=dev)
    first = 0
    for b, n in enumerate(lk):
        for p in range(npages[b]):
            rows = slice(ck[b] + p * PAGE, min(ck[b] + (p + 1) * PAGE, ck[b + 1]))
            kp[perm[first + p], :rows.stop - rows.start] = k[rows]
            vp[perm[first + p], :rows.stop - rows.start] = v[rows]
            table[b, p] = perm[first + p]
        first += npages[b]
    seqlen_k = torch.tensor(lk, dtype=torch.int32, device=dev)

    layouts = {"dense": dict(k=k, v=v, cu_seqlens_k=ck),
               "paged64": dict(k=kp, v=vp, block_table=table, seqlen_k=seqlen_k)}
    for lname, kv in layouts.items():
        kw = dict(cu_seqlens_q=cq, max_seqlen_q=max(lq), **{n: t for n, t in kv.items() if n not in ("k", "v")})
        for splits in (0, 5, 1):
            ws = None
            if splits != 1:
                n, nbytes = fa4.mha_split_count(q, kv["k"], kv["v"], causal=True, num_splits=splits, **kw)
                ws = torch.empty(max(nbytes, 16), device=dev, dtype=torch.uint8).fill_(0xFF)  # NaN poison
            else:
                n = 1
            out = torch.full_like(q, float("nan"))
            o, lse = fa4.mha_fwd(q, kv["k"], kv["v"], causal=True, return_lse=True, out=out, num_splits=splits,
                                 workspace=ws, **kw)
            err, lerr = 0.0, 0.0
            for b, (ro, rl) in enumerate(refs):
                got = o[cq[b]:cq[b + 1]].float()
                err = max(err, ((got - ro).norm() / ro.norm()).item() if ro.numel() else 0.0)
                lerr = max(lerr, (lse[:, cq[b]:cq[b + 1]] - rl).abs().max().item() if rl.numel() else 0.0)
            tail_ok = bool(torch.isnan(o[total_q - TAIL:]).all())
            check("varlen %s num_splits=%d (runtime: %d splits)" % (lname, splits, n),
                  err < 1e-2 and lerr < 1e-3 and tail_ok and not torch.isnan(o[:total_q - TAIL]).any(),
                  "rel L2 %.2e, lse err %.2e, tail rows untouched %s" % (err, lerr, tail_ok))
    print("serving py: %d passed, %d failed" % (passed, failed), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
