// MUTATION: value names shuffled (renaming only)
// BASE: ../fixtures/softmax.mlir
// EXPECT: exact
entry @softmax_kernel_Kt1_A2f32_1v4l0_2t1_p16_A2f32_1v4l0_2t1_p16_I1024(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<ptr<f32>>, %arg6: tile<i32>, %arg7: tile<i32>, %arg8: tile<i32>, %arg9: tile<i32>) optimization_hints=<default = {}> {
  %0 = make_token : token
  %base_ptr = assume div_by<16>, %arg0 : tile<ptr<f32>>
  %base_ptr_0 = assume div_by<4>, %arg3 : tile<i32>
  %base_ptr_1 = assume div_by<16>, %arg5 : tile<ptr<f32>>
  %base_ptr_2 = assume div_by<4>, %arg8 : tile<i32>
  %cst_1_i32 = constant <i32: 1> : tile<i32>
  %cst_1_i32_3 = constant <i32: 1> : tile<i32>
  %base_ptr_4 = assume bounded<0, ?>, %arg1 : tile<i32>
  %base_ptr_5 = assume bounded<0, ?>, %arg2 : tile<i32>
  %base_ptr_assume = assume bounded<0, ?>, %base_ptr_0 : tile<i32>
  %base_ptr_assume_assume = assume div_by<4>, %base_ptr_assume : tile<i32>
  %tv_in = make_tensor_view %base_ptr, shape = [%base_ptr_4, %base_ptr_5], strides = [%base_ptr_assume_assume, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
  %base_ptr_6 = assume bounded<0, ?>, %arg6 : tile<i32>
  %base_ptr_7 = assume bounded<0, ?>, %arg7 : tile<i32>
  %base_ptr_assume_8 = assume bounded<0, ?>, %base_ptr_2 : tile<i32>
  %base_ptr_assume_assume_9 = assume div_by<4>, %base_ptr_assume_8 : tile<i32>
  %tv_in_10 = make_tensor_view %base_ptr_1, shape = [%base_ptr_6, %base_ptr_7], strides = [%base_ptr_assume_assume_9, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %cst_0_i32 = constant <i32: 0> : tile<i32>
  %pv_in = make_partition_view %tv_in : partition_view<tile=(1x1024), padding_value = neg_inf, tensor_view<?x?xf32, strides=[?,1]>>
  %loaded, %result_token = load_view_tko weak %pv_in[%blockId_x, %cst_0_i32] token = %0 : partition_view<tile=(1x1024), padding_value = neg_inf, tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> tile<1x1024xf32>, token
  %row_max = reduce %loaded dim=1 identities=[0xFF800000 : f32] : tile<1x1024xf32> -> tile<1xf32> 
  (%lhs: tile<f32>, %row_max_rhs: tile<f32>) {
    %combined = maxf %lhs, %row_max_rhs : tile<f32>
    yield %combined : tile<f32>
  }
  %reshape = reshape %row_max : tile<1xf32> -> tile<1x1xf32>
  %bcast = broadcast %reshape : tile<1x1xf32> -> tile<1x1024xf32>
  %3 = subf %loaded, %bcast  : tile<1x1024xf32>
  %2 = exp %3  : tile<1x1024xf32>
  %row_sum = reduce %2 dim=1 identities=[0.000000e+00 : f32] : tile<1x1024xf32> -> tile<1xf32> 
  (%lhs: tile<f32>, %row_max_rhs: tile<f32>) {
    %combined = addf %lhs, %row_max_rhs  : tile<f32>
    yield %combined : tile<f32>
  }
  %reshape_12 = reshape %row_sum : tile<1xf32> -> tile<1x1xf32>
  %cst_0_i32_13 = constant <i32: 0> : tile<i32>
  %bcast_14 = broadcast %reshape_12 : tile<1x1xf32> -> tile<1x1024xf32>
  %1 = divf %2, %bcast_14  : tile<1x1024xf32>
  %pv_in_15 = make_partition_view %tv_in_10 : partition_view<tile=(1x1024), tensor_view<?x?xf32, strides=[?,1]>>
  %4 = store_view_tko weak %1, %pv_in_15[%blockId_x, %cst_0_i32_13] token = %0 : tile<1x1024xf32>, partition_view<tile=(1x1024), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> token
  return
}
