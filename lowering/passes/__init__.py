"""The XNNPACK backend's passes, one per file, each named ``xnnpack.*`` (and ``fold-constants``):
rewrites that work around what XNNPACK or ExecuTorch 1.5.1 cannot define or gets wrong, or that let
XNNPACK run more of the program.

:data:`PASSES` names them; ``import lowering`` hands that table to the registry
(:func:`passes.registry.register_backend_passes`), so a pipeline finds every pass of the backend
with no installed package metadata. A pass's module is imported only when a pipeline names it.
"""

# name -> "module:Class"; a name whose class has another name is an old name of that pass
PASSES = {
    "xnnpack.as-strided-as-view": "lowering.passes.as_strided_as_view:AsStridedAsView",
    "fold-constants": "lowering.passes.fold_constants:FoldConstants",
    "xnnpack.avg-pool-padding-as-pad": "lowering.passes.avg_pool_padding_as_pad:AvgPoolPaddingAsPad",
    "xnnpack.bf16-activations-in-fp32": "lowering.passes.bf16_activations_in_fp32:Bf16ActivationsInFp32",
    "xnnpack.bf16-bmm-f32-output": "lowering.passes.bf16_bmm_f32_output:Bf16BmmF32Output",
    "xnnpack.bf16-in-fp32": "lowering.passes.bf16_in_fp32:Bf16InFp32",
    "xnnpack.bf16-linear-as-f16": "lowering.passes.bf16_linear_as_f16:Bf16LinearAsF16",
    "xnnpack.bf16-rounded-arithmetic": "lowering.passes.bf16_rounded_arithmetic:Bf16RoundedArithmetic",
    "xnnpack.bmm-distinct-operands": "lowering.passes.bmm_distinct_operands:BmmDistinctOperands",
    "xnnpack.casts-as-converts": "lowering.passes.casts_as_converts:CastsAsConverts",
    "xnnpack.decompose-conv3d": "lowering.passes.decompose_conv3d:DecomposeConv3d",
    "xnnpack.decompose-gelu-tanh": "lowering.passes.decompose_gelu_tanh:DecomposeGeluTanh",
    "xnnpack.decompose-group-norm": "lowering.passes.decompose_group_norm:DecomposeGroupNorm",
    "xnnpack.decompose-layer-norm": "lowering.passes.decompose_layer_norm:DecomposeLayerNorm",
    "xnnpack.dequantize-per-float-reader": "lowering.passes.dequantize_per_float_reader:DequantizePerFloatReader",
    "xnnpack.drop-leading-unit-dims": "lowering.passes.drop_leading_unit_dims:DropLeadingUnitDims",
    "xnnpack.dynamic-mm-as-bmm": "lowering.passes.dynamic_mm_as_bmm:DynamicMmAsBmm",
    "xnnpack.eager-scalar-promotion": "lowering.passes.eager_scalar_promotion:EagerScalarPromotion",
    "xnnpack.expand-as-broadcast": "lowering.passes.expand_as_broadcast:ExpandAsBroadcast",
    "xnnpack.fold-repeat-into-bmm": "lowering.passes.fold_repeat_into_bmm:FoldRepeatIntoBmm",
    "xnnpack.fuse-sibling-linears": "lowering.passes.fuse_sibling_linears:FuseSiblingLinears",
    "xnnpack.index-select-as-slices": "lowering.passes.index_select_as_slices:IndexSelectAsSlices",
    "xnnpack.layer-norm-in-fp32": "lowering.passes.layer_norm_in_fp32:LayerNormInFp32",
    "xnnpack.mean-keepdim": "lowering.passes.mean_keepdim:MeanKeepdim",
    "xnnpack.mean-over-last-dims": "lowering.passes.mean_over_last_dims:MeanOverLastDims",
    "xnnpack.merge-clamps": "lowering.passes.merge_clamps:MergeClamps",
    "xnnpack.merge-head-chains": "lowering.passes.merge_head_chains:MergeHeadChains",
    "xnnpack.partial-rotary-whole-head": "lowering.passes.partial_rotary_whole_head:PartialRotaryWholeHead",
    "xnnpack.patch-conv-as-matmul": "lowering.passes.patch_conv_as_matmul:PatchConvAsMatmul",
    "xnnpack.pow-as-multiplies": "lowering.passes.pow_as_multiplies:PowAsMultiplies",
    "xnnpack.remove-no-ops": "lowering.passes.remove_no_ops:XnnpackRemoveNoOps",
    "xnnpack.rope-as-pair-swap": "lowering.passes.rope_as_pair_swap:RopeAsPairSwap",
    "xnnpack.rotate-half-sign-in-sin": "lowering.passes.rotate_half_sign:RotateHalfSignInSin",
    "xnnpack.safe-softmax": "lowering.passes.safe_softmax:SafeSoftmax",
    "xnnpack.saturate-portable-quantize": "lowering.passes.saturate_portable_quantize:SaturatePortableQuantize",
    "xnnpack.scalar-operands-as-constants": "lowering.passes.scalar_operands_as_constants:ScalarOperandsAsConstants",
    "xnnpack.select-as-slice": "lowering.passes.select_as_slice:SelectAsSlice",
    "xnnpack.slices-as-xir-slices": "lowering.passes.slices_as_xir_slices:SlicesAsXirSlices",
    "xnnpack.split-as-slices": "lowering.passes.split_as_slices:SplitAsSlices",
    "xnnpack.step-slice-as-view": "lowering.passes.step_slice_as_view:StepSliceAsView",
    "xnnpack.weight-only-int8-linear": "lowering.passes.weight_only_int8_linear:WeightOnlyInt8Linear",
    "xnnpack.weight-only-linear-bias": "lowering.passes.weight_only_linear_bias:WeightOnlyLinearBias",
    # old names: asking for one is an error that gives the new one
    "bf16-bmm-f32-output": "lowering.passes.bf16_bmm_f32_output:Bf16BmmF32Output",
    "bf16-in-fp32": "lowering.passes.bf16_in_fp32:Bf16InFp32",
    "decompose-conv3d": "lowering.passes.decompose_conv3d:DecomposeConv3d",
    "decompose-gelu-tanh": "lowering.passes.decompose_gelu_tanh:DecomposeGeluTanh",
    "fold-repeat-into-bmm": "lowering.passes.fold_repeat_into_bmm:FoldRepeatIntoBmm",
    "layer-norm-in-fp32": "lowering.passes.layer_norm_in_fp32:LayerNormInFp32",
    "mean-keepdim": "lowering.passes.mean_keepdim:MeanKeepdim",
}
