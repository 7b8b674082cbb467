# A decode layer that takes the kernel from the package's re-export.
from ..utils.sgl_utils import flash_attn_with_kvcache


class LlamaLayer:
    def token_attention(self, q, cache_k, cache_v, infer_state, layer_weight):
        o = flash_attn_with_kvcache(  # call: sgl-kernel
            q=q.view(-1, self.tp_q_head_num, self.head_dim),
            k_cache=cache_k.view(-1, 1, self.tp_k_head_num, self.head_dim),
            v_cache=cache_v.view(-1, 1, self.tp_k_head_num, self.head_dim),
            page_table=infer_state.page_table,
            cache_seqlens=infer_state.b_seq_len,
            cu_seqlens_q=infer_state.cu_seqlens_q,
            cu_seqlens_k_new=infer_state.cu_seqlens_k,
            max_seqlen_q=1,
            softmax_scale=1.0 / (self.head_dim**0.5),
            causal=False,
            window_size=(-1, -1),
            softcap=0.0,
            return_softmax_lse=False,
        )
        return o
