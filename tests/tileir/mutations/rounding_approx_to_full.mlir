// MUTATION: divf rounding<approx> -> rounding<full>
// BASE: ../fixtures/online_softmax.mlir
// EXPECT: critical rounding_mode
entry @online_softmax_kernel_Kt1_A2f32_1v4l0_2t1_p16_A2f32_1v4l0_2t1_p16_I8192_I1024(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<ptr<f32>>, %arg6: tile<i32>, %arg7: tile<i32>, %arg8: tile<i32>, %arg9: tile<i32>) optimization_hints=<default = {}> {
  %0 = make_token : token
  %assume = assume div_by<16>, %arg0 : tile<ptr<f32>>
  %assume_0 = assume div_by<4>, %arg3 : tile<i32>
  %assume_1 = assume div_by<16>, %arg5 : tile<ptr<f32>>
  %assume_2 = assume div_by<4>, %arg8 : tile<i32>
  %cst_1_i32 = constant <i32: 1> : tile<i32>
  %cst_1_i32_3 = constant <i32: 1> : tile<i32>
  %assume_4 = assume bounded<0, ?>, %arg1 : tile<i32>
  %assume_5 = assume bounded<0, ?>, %arg2 : tile<i32>
  %assume_assume = assume bounded<0, ?>, %assume_0 : tile<i32>
  %assume_assume_assume = assume div_by<4>, %assume_assume : tile<i32>
  %tview = make_tensor_view %assume, shape = [%assume_4, %assume_5], strides = [%assume_assume_assume, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
  %assume_6 = assume bounded<0, ?>, %arg6 : tile<i32>
  %assume_7 = assume bounded<0, ?>, %arg7 : tile<i32>
  %assume_assume_8 = assume bounded<0, ?>, %assume_2 : tile<i32>
  %assume_assume_assume_9 = assume div_by<4>, %assume_assume_8 : tile<i32>
  %tview_10 = make_tensor_view %assume_1, shape = [%assume_6, %assume_7], strides = [%assume_assume_assume_9, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %cst_f32 = constant <f32: 0xFF800000> : tile<1x1xf32>
  %cst_0_f32 = constant <f32: 0.000000e+00> : tile<1x1xf32>
  %cst_8_i32 = constant <i32: 8> : tile<i32>
  %cst_0_i32 = constant <i32: 0> : tile<i32>
  %cst_1_i32_11 = constant <i32: 1> : tile<i32>
  %pview = make_partition_view %tview : partition_view<tile=(1x1024), padding_value = neg_inf, tensor_view<?x?xf32, strides=[?,1]>>
  %cst_f32_12 = constant <f32: 1.44269502> : tile<f32>
  %reshape = reshape %cst_f32_12 : tile<f32> -> tile<1x1xf32>
  %cst_f32_13 = constant <f32: 1.44269502> : tile<f32>
  %reshape_14 = reshape %cst_f32_13 : tile<f32> -> tile<1x1xf32>
  %bcast = broadcast %reshape_14 : tile<1x1xf32> -> tile<1x1024xf32>
  %for:2 = for %loopIdx in (%cst_0_i32 to %cst_8_i32, step %cst_1_i32_11) : tile<i32> iter_values(%iterArg0 = %cst_f32, %iterArg1 = %cst_0_f32) -> (tile<1x1xf32>, tile<1x1xf32>) {
    %tile, %result_token = load_view_tko weak %pview[%blockId_x, %loopIdx] token = %0 : partition_view<tile=(1x1024), padding_value = neg_inf, tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> tile<1x1024xf32>, token
    %reduce = reduce %tile dim=1 identities=[0xFF800000 : f32] : tile<1x1024xf32> -> tile<1xf32> 
    (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
      %9 = maxf %reduce_lhs, %reduce_rhs : tile<f32>
      yield %9 : tile<f32>
    }
    %reshape_25 = reshape %reduce : tile<1xf32> -> tile<1x1xf32>
    %1 = maxf %iterArg0, %reshape_25 : tile<1x1xf32>
    %2 = subf %iterArg0, %1  : tile<1x1xf32>
    %3 = mulf %2, %reshape  : tile<1x1xf32>
    %4 = exp2 %3 flush_to_zero : tile<1x1xf32>
    %bcast_26 = broadcast %1 : tile<1x1xf32> -> tile<1x1024xf32>
    %5 = subf %tile, %bcast_26  : tile<1x1024xf32>
    %6 = mulf %5, %bcast  : tile<1x1024xf32>
    %7 = exp2 %6 flush_to_zero : tile<1x1024xf32>
    %reduce_27 = reduce %7 dim=1 identities=[0.000000e+00 : f32] : tile<1x1024xf32> -> tile<1xf32> 
    (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
      %9 = addf %reduce_lhs, %reduce_rhs  : tile<f32>
      yield %9 : tile<f32>
    }
    %reshape_28 = reshape %reduce_27 : tile<1xf32> -> tile<1x1xf32>
    %8 = fma %iterArg1, %4, %reshape_28  : tile<1x1xf32>
    continue %1, %8 : tile<1x1xf32>, tile<1x1xf32>
  }
  %cst_8_i32_15 = constant <i32: 8> : tile<i32>
  %cst_0_i32_16 = constant <i32: 0> : tile<i32>
  %cst_1_i32_17 = constant <i32: 1> : tile<i32>
  %pview_18 = make_partition_view %tview : partition_view<tile=(1x1024), padding_value = neg_inf, tensor_view<?x?xf32, strides=[?,1]>>
  %bcast_19 = broadcast %for#0 : tile<1x1xf32> -> tile<1x1024xf32>
  %cst_f32_20 = constant <f32: 1.44269502> : tile<f32>
  %reshape_21 = reshape %cst_f32_20 : tile<f32> -> tile<1x1xf32>
  %bcast_22 = broadcast %reshape_21 : tile<1x1xf32> -> tile<1x1024xf32>
  %bcast_23 = broadcast %for#1 : tile<1x1xf32> -> tile<1x1024xf32>
  %pview_24 = make_partition_view %tview_10 : partition_view<tile=(1x1024), tensor_view<?x?xf32, strides=[?,1]>>
  for %loopIdx in (%cst_0_i32_16 to %cst_8_i32_15, step %cst_1_i32_17) : tile<i32> {
    %tile, %result_token = load_view_tko weak %pview_18[%blockId_x, %loopIdx] token = %0 : partition_view<tile=(1x1024), padding_value = neg_inf, tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> tile<1x1024xf32>, token
    %1 = subf %tile, %bcast_19  : tile<1x1024xf32>
    %2 = mulf %1, %bcast_22  : tile<1x1024xf32>
    %3 = exp2 %2 flush_to_zero : tile<1x1024xf32>
    %4 = divf %3, %bcast_23 rounding<full> : tile<1x1024xf32>
    %5 = store_view_tko weak %4, %pview_24[%blockId_x, %loopIdx] token = %0 : tile<1x1024xf32>, partition_view<tile=(1x1024), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> token
  }
  return
}
