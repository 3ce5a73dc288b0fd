// MUTATION: first chunk loop runs 8 chunks instead of 4
// BASE: ../fixtures/rmsnorm.mlir
// EXPECT: critical loop_structure
entry @rmsnorm_kernel_Kt1_A2f16_1v8l0_2t1_p16_A1f16_1t1_p16_A2f16_1v8l0_2t1_p16_I4096_I1024_F3eb0c6f7a0b5ed8d(%arg0: tile<ptr<f16>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<ptr<f16>>, %arg6: tile<i32>, %arg7: tile<i32>, %arg8: tile<ptr<f16>>, %arg9: tile<i32>, %arg10: tile<i32>, %arg11: tile<i32>, %arg12: tile<i32>) optimization_hints=<default = {occupancy = 2}> {
  %0 = make_token : token
  %assume = assume div_by<16>, %arg0 : tile<ptr<f16>>
  %assume_0 = assume div_by<8>, %arg3 : tile<i32>
  %assume_1 = assume div_by<16>, %arg5 : tile<ptr<f16>>
  %assume_2 = assume div_by<16>, %arg8 : tile<ptr<f16>>
  %assume_3 = assume div_by<8>, %arg11 : tile<i32>
  %cst_1_i32 = constant <i32: 1> : tile<i32>
  %cst_1_i32_4 = constant <i32: 1> : tile<i32>
  %cst_1_i32_5 = constant <i32: 1> : tile<i32>
  %assume_6 = assume bounded<0, ?>, %arg1 : tile<i32>
  %assume_7 = assume bounded<0, ?>, %arg2 : tile<i32>
  %assume_assume = assume bounded<0, ?>, %assume_0 : tile<i32>
  %assume_assume_assume = assume div_by<8>, %assume_assume : tile<i32>
  %tview = make_tensor_view %assume, shape = [%assume_6, %assume_7], strides = [%assume_assume_assume, 1] : tile<i32> -> tensor_view<?x?xf16, strides=[?,1]>
  %assume_8 = assume bounded<0, ?>, %arg6 : tile<i32>
  %tview_9 = make_tensor_view %assume_1, shape = [%assume_8], strides = [1] : tile<i32> -> tensor_view<?xf16, strides=[1]>
  %assume_10 = assume bounded<0, ?>, %arg9 : tile<i32>
  %assume_11 = assume bounded<0, ?>, %arg10 : tile<i32>
  %assume_assume_12 = assume bounded<0, ?>, %assume_3 : tile<i32>
  %assume_assume_assume_13 = assume div_by<8>, %assume_assume_12 : tile<i32>
  %tview_14 = make_tensor_view %assume_2, shape = [%assume_10, %assume_11], strides = [%assume_assume_assume_13, 1] : tile<i32> -> tensor_view<?x?xf16, strides=[?,1]>
  %cst_f32 = constant <f32: 9.99999997E-7> : tile<f32>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %cst_0_f32 = constant <f32: 0.000000e+00> : tile<1x1024xf32>
  %cst_4_i32 = constant <i32: 8> : tile<i32>
  %cst_0_i32 = constant <i32: 0> : tile<i32>
  %cst_1_i32_15 = constant <i32: 1> : tile<i32>
  %pview = make_partition_view %tview : partition_view<tile=(1x1024), padding_value = zero, tensor_view<?x?xf16, strides=[?,1]>>
  %for = for %loopIdx in (%cst_0_i32 to %cst_4_i32, step %cst_1_i32_15) : tile<i32> iter_values(%iterArg0 = %cst_0_f32) -> (tile<1x1024xf32>) {
    %tile, %result_token = load_view_tko weak %pview[%blockId_x, %loopIdx] token = %0 : partition_view<tile=(1x1024), padding_value = zero, tensor_view<?x?xf16, strides=[?,1]>>, tile<i32> -> tile<1x1024xf16>, token
    %4 = ftof %tile  : tile<1x1024xf16> -> tile<1x1024xf32>
    %5 = fma %4, %4, %iterArg0  : tile<1x1024xf32>
    continue %5 : tile<1x1024xf32>
  }
  %reduce = reduce %for dim=1 identities=[0.000000e+00 : f32] : tile<1x1024xf32> -> tile<1xf32> 
  (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
    %4 = addf %reduce_lhs, %reduce_rhs  : tile<f32>
    yield %4 : tile<f32>
  }
  %reshape = reshape %reduce : tile<1xf32> -> tile<1x1xf32>
  %cst_4096_f32 = constant <f32: 4.096000e+03> : tile<f32>
  %reshape_16 = reshape %cst_4096_f32 : tile<f32> -> tile<1x1xf32>
  %1 = divf %reshape, %reshape_16  : tile<1x1xf32>
  %reshape_17 = reshape %cst_f32 : tile<f32> -> tile<1x1xf32>
  %2 = addf %1, %reshape_17  : tile<1x1xf32>
  %3 = rsqrt %2 : tile<1x1xf32>
  %cst_4_i32_18 = constant <i32: 4> : tile<i32>
  %cst_0_i32_19 = constant <i32: 0> : tile<i32>
  %cst_1_i32_20 = constant <i32: 1> : tile<i32>
  %pview_21 = make_partition_view %tview : partition_view<tile=(1x1024), padding_value = zero, tensor_view<?x?xf16, strides=[?,1]>>
  %pview_22 = make_partition_view %tview_9 : partition_view<tile=(1024), padding_value = zero, tensor_view<?xf16, strides=[1]>>
  %bcast = broadcast %3 : tile<1x1xf32> -> tile<1x1024xf32>
  %pview_23 = make_partition_view %tview_14 : partition_view<tile=(1x1024), tensor_view<?x?xf16, strides=[?,1]>>
  for %loopIdx in (%cst_0_i32_19 to %cst_4_i32_18, step %cst_1_i32_20) : tile<i32> {
    %tile, %result_token = load_view_tko weak %pview_21[%blockId_x, %loopIdx] token = %0 : partition_view<tile=(1x1024), padding_value = zero, tensor_view<?x?xf16, strides=[?,1]>>, tile<i32> -> tile<1x1024xf16>, token
    %tile_24, %result_token_25 = load_view_tko weak %pview_22[%loopIdx] token = %0 : partition_view<tile=(1024), padding_value = zero, tensor_view<?xf16, strides=[1]>>, tile<i32> -> tile<1024xf16>, token
    %4 = ftof %tile  : tile<1x1024xf16> -> tile<1x1024xf32>
    %5 = mulf %4, %bcast  : tile<1x1024xf32>
    %6 = ftof %tile_24  : tile<1024xf16> -> tile<1024xf32>
    %reshape_26 = reshape %6 : tile<1024xf32> -> tile<1x1024xf32>
    %7 = mulf %5, %reshape_26  : tile<1x1024xf32>
    %8 = ftof %7  : tile<1x1024xf32> -> tile<1x1024xf16>
    %9 = store_view_tko weak %8, %pview_23[%blockId_x, %loopIdx] token = %0 : tile<1x1024xf16>, partition_view<tile=(1x1024), tensor_view<?x?xf16, strides=[?,1]>>, tile<i32> -> token
  }
  return
}
