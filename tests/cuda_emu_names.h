/* cuda_emu_names.h — the launchers of kernels.cu under other names when that file is
 * compiled for the CPU emulation (tests/cuda_emu.h), so that the emulated kernels and
 * the real ones can sit in one program. Include before backend/cuda/cuda_backend.h. */
#ifndef PPDL_CUDA_EMU_NAMES_H
#define PPDL_CUDA_EMU_NAMES_H
#define ppdl_cu_add ppdl_emu_add
#define ppdl_cu_axpy ppdl_emu_axpy
#define ppdl_cu_bias_add ppdl_emu_bias_add
#define ppdl_cu_bias_grad ppdl_emu_bias_grad
#define ppdl_cu_act_fwd ppdl_emu_act_fwd
#define ppdl_cu_act_bwd ppdl_emu_act_bwd
#define ppdl_cu_sumsq_partials ppdl_emu_sumsq_partials
#define ppdl_cu_adamw ppdl_emu_adamw
#define ppdl_cu_layernorm_fwd ppdl_emu_layernorm_fwd
#define ppdl_cu_layernorm_bwd ppdl_emu_layernorm_bwd
#define ppdl_cu_embedding_fwd ppdl_emu_embedding_fwd
#define ppdl_cu_embedding_bwd ppdl_emu_embedding_bwd
#define ppdl_cu_qkv_split ppdl_emu_qkv_split
#define ppdl_cu_qkv_merge ppdl_emu_qkv_merge
#define ppdl_cu_heads_seq ppdl_emu_heads_seq
#define ppdl_cu_causal_softmax_fwd ppdl_emu_causal_softmax_fwd
#define ppdl_cu_causal_softmax_bwd ppdl_emu_causal_softmax_bwd
#define ppdl_cu_causal_softmax_tail_fwd ppdl_emu_causal_softmax_tail_fwd
#define ppdl_cu_softmax_xent ppdl_emu_softmax_xent
#define ppdl_cu_im2col ppdl_emu_im2col
#define ppdl_cu_col2im ppdl_emu_col2im
#define ppdl_cu_maxpool_fwd ppdl_emu_maxpool_fwd
#define ppdl_cu_maxpool_bwd ppdl_emu_maxpool_bwd
#define ppdl_cu_round_bf16 ppdl_emu_round_bf16
#define ppdl_cu_narrow_bf16 ppdl_emu_narrow_bf16
#define ppdl_cu_pack_bf16 ppdl_emu_pack_bf16
#define ppdl_cu_unpack_bf16 ppdl_emu_unpack_bf16
#endif
