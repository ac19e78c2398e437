/* abi.c - the field offsets of fa4.h's structs, for tests/python/abi.sh to compare with the
 * ctypes mirrors in python/fa4.py (a field out of step there would pass wrong arguments). */
#include <stddef.h>
#include <stdio.h>

#include "fa4.h"

#define F(T, f) printf("%s.%s %zu\n", #T, #f, offsetof(T, f))

int main(void)
{
    printf("fa4_options %zu\nfa4_mha_args %zu\nfa4_mla_sparse_args %zu\n", sizeof(fa4_options), sizeof(fa4_mha_args),
           sizeof(fa4_mla_sparse_args));
    printf("fa4_mha_bwd_args %zu\nfa4_kv_append_args %zu\n", sizeof(fa4_mha_bwd_args), sizeof(fa4_kv_append_args));
    F(fa4_options, verbose); F(fa4_options, disable_jit); F(fa4_options, remember_buffers);
    F(fa4_mha_args, q_stride); F(fa4_mha_args, softmax_scale); F(fa4_mha_args, config); F(fa4_mha_args, k_rope);
    F(fa4_mha_args, v_descale);
    F(fa4_mha_args, sink);
    F(fa4_mha_args, score_mod);
    F(fa4_mha_args, score_mod_aux);
    F(fa4_mha_args, cu_seqlens_q); F(fa4_mha_args, max_seqlen_q); F(fa4_mha_args, cu_seqlens_k_host);
    F(fa4_mha_args, block_table); F(fa4_mha_args, seqlens_k); F(fa4_mha_args, page_size); F(fa4_mha_args, num_pages);
    F(fa4_mha_args, kv_early); F(fa4_mha_args, softcap); F(fa4_mha_args, alibi_slopes);
    F(fa4_mla_sparse_args, s_q); F(fa4_mla_sparse_args, topk); F(fa4_mla_sparse_args, q_stride);
    F(fa4_mla_sparse_args, out_stride); F(fa4_mla_sparse_args, sm_scale); F(fa4_mla_sparse_args, config);
    F(fa4_mla_sparse_args, kv_dtype); F(fa4_mla_sparse_args, kv_scale); F(fa4_mla_sparse_args, kv_scale_block);
    printf("fa4_bundle %zu\nfa4_cache_entry %zu\n", sizeof(fa4_bundle), sizeof(fa4_cache_entry));
    F(fa4_bundle, name); F(fa4_bundle, generator); F(fa4_bundle, n_kernels); F(fa4_bundle, kernels);
    F(fa4_cache_entry, file); F(fa4_cache_entry, problem); F(fa4_cache_entry, this_build); F(fa4_cache_entry, bytes);
    F(fa4_cache_entry, mtime); F(fa4_cache_entry, atime);
    F(fa4_mha_bwd_args, dq); F(fa4_mha_bwd_args, q_stride); F(fa4_mha_bwd_args, dv_stride);
    F(fa4_mha_bwd_args, softmax_scale); F(fa4_mha_bwd_args, config); F(fa4_mha_bwd_args, sink);
    F(fa4_mha_bwd_args, score_mod); F(fa4_mha_bwd_args, cu_seqlens_q); F(fa4_mha_bwd_args, cu_seqlens_k_host);
    F(fa4_mha_bwd_args, deterministic); F(fa4_mha_bwd_args, workspace_size); F(fa4_mha_bwd_args, softcap);
    F(fa4_mha_bwd_args, dlse);
    F(fa4_kv_append_args, k); F(fa4_kv_append_args, batch); F(fa4_kv_append_args, v_depth);
    F(fa4_kv_append_args, k_stride); F(fa4_kv_append_args, v_cache_stride); F(fa4_kv_append_args, cache_batch);
    F(fa4_kv_append_args, cache_batch_idx); F(fa4_kv_append_args, block_table); F(fa4_kv_append_args, page_size);
    F(fa4_kv_append_args, num_pages); F(fa4_kv_append_args, cache_seqlens); F(fa4_kv_append_args, cache_seqlen);
    F(fa4_kv_append_args, seqlens_out);
    return 0;
}
