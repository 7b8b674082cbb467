/* Run-time choice of the forward tile variant (the caller detects the CPU's features). */
#include "fa3_internal.h"

void fa3_fwd_tile_portable(const fa3_fwd_params *params, const fa3_tile *tile, float *workspace);
#if defined(__x86_64__) || defined(_M_X64)
void fa3_fwd_tile_avx2(const fa3_fwd_params *params, const fa3_tile *tile, float *workspace);
void fa3_fwd_tile_avx512(const fa3_fwd_params *params, const fa3_tile *tile, float *workspace);
#endif

void fa3_fwd_tile(const fa3_fwd_params *params, const fa3_tile *tile, float *workspace) {
#if defined(__x86_64__) || defined(_M_X64)
    if (params->isa == FA3_ISA_X86_AVX512) {
        fa3_fwd_tile_avx512(params, tile, workspace);
        return;
    }
    if (params->isa == FA3_ISA_X86_AVX2_FMA) {
        fa3_fwd_tile_avx2(params, tile, workspace);
        return;
    }
#endif
    fa3_fwd_tile_portable(params, tile, workspace);
}
