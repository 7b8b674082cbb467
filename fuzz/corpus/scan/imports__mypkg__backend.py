from mate.mha_interface import flash_attn_with_kvcache as attention
