// MUTATION: addf rounding<zero> -> addf (nearest even)
// BASE: ../fixtures/layernorm.mlir
// EXPECT: critical rounding_mode
entry @layernorm_kernel_Kt1_A2f32_1v4l0_2t1_p16_A1f32_1t1_p16_A1f32_1t1_p16_A2f16_1v8l0_2t1_p16_I1024_F3ee4f8b588e368f1(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<ptr<f32>>, %arg6: tile<i32>, %arg7: tile<i32>, %arg8: tile<ptr<f32>>, %arg9: tile<i32>, %arg10: tile<i32>, %arg11: tile<ptr<f16>>, %arg12: tile<i32>, %arg13: tile<i32>, %arg14: tile<i32>, %arg15: tile<i32>) optimization_hints=<default = {}> {
  %0 = make_token : token
  %assume = assume div_by<16>, %arg0 : tile<ptr<f32>>
  %assume_0 = assume div_by<4>, %arg3 : tile<i32>
  %assume_1 = assume div_by<16>, %arg5 : tile<ptr<f32>>
  %assume_2 = assume div_by<16>, %arg8 : tile<ptr<f32>>
  %assume_3 = assume div_by<16>, %arg11 : tile<ptr<f16>>
  %assume_4 = assume div_by<8>, %arg14 : tile<i32>
  %cst_1_i32 = constant <i32: 1> : tile<i32>
  %cst_1_i32_5 = constant <i32: 1> : tile<i32>
  %cst_1_i32_6 = constant <i32: 1> : tile<i32>
  %cst_1_i32_7 = constant <i32: 1> : tile<i32>
  %assume_8 = assume bounded<0, ?>, %arg1 : tile<i32>
  %assume_9 = assume bounded<0, ?>, %arg2 : tile<i32>
  %assume_assume = assume bounded<0, ?>, %assume_0 : tile<i32>
  %assume_assume_assume = assume div_by<4>, %assume_assume : tile<i32>
  %tview = make_tensor_view %assume, shape = [%assume_8, %assume_9], strides = [%assume_assume_assume, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
  %assume_10 = assume bounded<0, ?>, %arg6 : tile<i32>
  %tview_11 = make_tensor_view %assume_1, shape = [%assume_10], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %assume_12 = assume bounded<0, ?>, %arg9 : tile<i32>
  %tview_13 = make_tensor_view %assume_2, shape = [%assume_12], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %assume_14 = assume bounded<0, ?>, %arg12 : tile<i32>
  %assume_15 = assume bounded<0, ?>, %arg13 : tile<i32>
  %assume_assume_16 = assume bounded<0, ?>, %assume_4 : tile<i32>
  %assume_assume_assume_17 = assume div_by<8>, %assume_assume_16 : tile<i32>
  %tview_18 = make_tensor_view %assume_3, shape = [%assume_14, %assume_15], strides = [%assume_assume_assume_17, 1] : tile<i32> -> tensor_view<?x?xf16, strides=[?,1]>
  %cst_f32 = constant <f32: 9.99999974E-6> : tile<f32>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %cst_0_i32 = constant <i32: 0> : tile<i32>
  %pview = make_partition_view %tview : partition_view<tile=(1x1024), padding_value = zero, tensor_view<?x?xf32, strides=[?,1]>>
  %tile, %result_token = load_view_tko weak %pview[%blockId_x, %cst_0_i32] token = %0 : partition_view<tile=(1x1024), padding_value = zero, tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> tile<1x1024xf32>, token
  %reduce = reduce %tile dim=1 identities=[0.000000e+00 : f32] : tile<1x1024xf32> -> tile<1xf32> 
  (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
    %12 = addf %reduce_lhs, %reduce_rhs  : tile<f32>
    yield %12 : tile<f32>
  }
  %reshape = reshape %reduce : tile<1xf32> -> tile<1x1xf32>
  %cst_1024_f32 = constant <f32: 1.024000e+03> : tile<f32>
  %reshape_19 = reshape %cst_1024_f32 : tile<f32> -> tile<1x1xf32>
  %1 = divf %reshape, %reshape_19  : tile<1x1xf32>
  %bcast = broadcast %1 : tile<1x1xf32> -> tile<1x1024xf32>
  %2 = subf %tile, %bcast  : tile<1x1024xf32>
  %3 = mulf %2, %2  : tile<1x1024xf32>
  %reduce_20 = reduce %3 dim=1 identities=[0.000000e+00 : f32] : tile<1x1024xf32> -> tile<1xf32> 
  (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
    %12 = addf %reduce_lhs, %reduce_rhs  : tile<f32>
    yield %12 : tile<f32>
  }
  %reshape_21 = reshape %reduce_20 : tile<1xf32> -> tile<1x1xf32>
  %cst_1024_f32_22 = constant <f32: 1.024000e+03> : tile<f32>
  %reshape_23 = reshape %cst_1024_f32_22 : tile<f32> -> tile<1x1xf32>
  %4 = divf %reshape_21, %reshape_23  : tile<1x1xf32>
  %reshape_24 = reshape %cst_f32 : tile<f32> -> tile<1x1xf32>
  %5 = addf %4, %reshape_24  : tile<1x1xf32>
  %6 = rsqrt %5 flush_to_zero : tile<1x1xf32>
  %cst_0_i32_25 = constant <i32: 0> : tile<i32>
  %pview_26 = make_partition_view %tview_11 : partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>
  %tile_27, %result_token_28 = load_view_tko weak %pview_26[%cst_0_i32_25] token = %0 : partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<1024xf32>, token
  %reshape_29 = reshape %tile_27 : tile<1024xf32> -> tile<1x1024xf32>
  %cst_0_i32_30 = constant <i32: 0> : tile<i32>
  %pview_31 = make_partition_view %tview_13 : partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>
  %tile_32, %result_token_33 = load_view_tko weak %pview_31[%cst_0_i32_30] token = %0 : partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<1024xf32>, token
  %reshape_34 = reshape %tile_32 : tile<1024xf32> -> tile<1x1024xf32>
  %bcast_35 = broadcast %6 : tile<1x1xf32> -> tile<1x1024xf32>
  %7 = mulf %2, %bcast_35  : tile<1x1024xf32>
  %8 = mulf %7, %reshape_29  : tile<1x1024xf32>
  %9 = addf %8, %reshape_34 : tile<1x1024xf32>
  %cst_0_i32_36 = constant <i32: 0> : tile<i32>
  %10 = ftof %9  : tile<1x1024xf32> -> tile<1x1024xf16>
  %pview_37 = make_partition_view %tview_18 : partition_view<tile=(1x1024), tensor_view<?x?xf16, strides=[?,1]>>
  %11 = store_view_tko weak %10, %pview_37[%blockId_x, %cst_0_i32_36] token = %0 : tile<1x1024xf16>, partition_view<tile=(1x1024), tensor_view<?x?xf16, strides=[?,1]>>, tile<i32> -> token
  return
}
