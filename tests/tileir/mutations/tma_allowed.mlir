// MUTATION: allow_tma = false dropped on the B load (TMA allowed again)
// BASE: ../fixtures/persistent_swizzle.mlir
// EXPECT: critical tma
entry @persistent_matmul_kernel_Kt1_A2f16_1v8l0_2t1_p16_A2f16_1v8l0_2t1_p16_A2f16_1v8l0_2t1_p16_I128_I128_I32_I8(%arg0: tile<ptr<f16>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<ptr<f16>>, %arg6: tile<i32>, %arg7: tile<i32>, %arg8: tile<i32>, %arg9: tile<i32>, %arg10: tile<ptr<f16>>, %arg11: tile<i32>, %arg12: tile<i32>, %arg13: tile<i32>, %arg14: tile<i32>) optimization_hints=<default = {}> {
  %0 = make_token : token
  %assume = assume div_by<16>, %arg0 : tile<ptr<f16>>
  %assume_0 = assume div_by<8>, %arg3 : tile<i32>
  %assume_1 = assume div_by<16>, %arg5 : tile<ptr<f16>>
  %assume_2 = assume div_by<8>, %arg8 : tile<i32>
  %assume_3 = assume div_by<16>, %arg10 : tile<ptr<f16>>
  %assume_4 = assume div_by<8>, %arg13 : tile<i32>
  %cst_1_i32 = constant <i32: 1> : tile<i32>
  %cst_1_i32_5 = constant <i32: 1> : tile<i32>
  %cst_1_i32_6 = constant <i32: 1> : tile<i32>
  %assume_7 = assume bounded<0, ?>, %arg1 : tile<i32>
  %assume_8 = assume bounded<0, ?>, %arg2 : tile<i32>
  %assume_assume = assume bounded<0, ?>, %assume_0 : tile<i32>
  %assume_assume_assume = assume div_by<8>, %assume_assume : tile<i32>
  %tview = make_tensor_view %assume, shape = [%assume_7, %assume_8], strides = [%assume_assume_assume, 1] : tile<i32> -> tensor_view<?x?xf16, strides=[?,1]>
  %assume_9 = assume bounded<0, ?>, %arg6 : tile<i32>
  %assume_10 = assume bounded<0, ?>, %arg7 : tile<i32>
  %assume_assume_11 = assume bounded<0, ?>, %assume_2 : tile<i32>
  %assume_assume_assume_12 = assume div_by<8>, %assume_assume_11 : tile<i32>
  %tview_13 = make_tensor_view %assume_1, shape = [%assume_9, %assume_10], strides = [%assume_assume_assume_12, 1] : tile<i32> -> tensor_view<?x?xf16, strides=[?,1]>
  %assume_14 = assume bounded<0, ?>, %arg11 : tile<i32>
  %assume_15 = assume bounded<0, ?>, %arg12 : tile<i32>
  %assume_assume_16 = assume bounded<0, ?>, %assume_4 : tile<i32>
  %assume_assume_assume_17 = assume div_by<8>, %assume_assume_16 : tile<i32>
  %tview_18 = make_tensor_view %assume_3, shape = [%assume_14, %assume_15], strides = [%assume_assume_assume_17, 1] : tile<i32> -> tensor_view<?x?xf16, strides=[?,1]>
  %cst_8_i32 = constant <i32: 8> : tile<i32>
  %pview = make_partition_view %tview_18 : partition_view<tile=(128x128), tensor_view<?x?xf16, strides=[?,1]>>
  %1:2 = get_index_space_shape %pview : partition_view<tile=(128x128), tensor_view<?x?xf16, strides=[?,1]>> -> tile<i32>
  %pview_19 = make_partition_view %tview_18 : partition_view<tile=(128x128), tensor_view<?x?xf16, strides=[?,1]>>
  %2:2 = get_index_space_shape %pview_19 : partition_view<tile=(128x128), tensor_view<?x?xf16, strides=[?,1]>> -> tile<i32>
  %pview_20 = make_partition_view %tview : partition_view<tile=(128x32), tensor_view<?x?xf16, strides=[?,1]>>
  %3:2 = get_index_space_shape %pview_20 : partition_view<tile=(128x32), tensor_view<?x?xf16, strides=[?,1]>> -> tile<i32>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %4 = muli %1#0, %2#1 : tile<i32>
  %gridSize_x, %gridSize_y, %gridSize_z = get_num_tile_blocks : tile<i32>
  %5 = muli %cst_8_i32, %2#1 : tile<i32>
  %cst_0_i32 = constant <i32: 0> : tile<i32>
  %6 = cmpi less_than %5, %cst_0_i32, signed : tile<i32> -> tile<i1>
  %cst_0_i32_21 = constant <i32: 0> : tile<i32>
  %cst_0_i32_22 = constant <i32: 0> : tile<i32>
  %7 = cmpi less_than %5, %cst_0_i32_22, signed : tile<i32> -> tile<i1>
  %cst_0_f32 = constant <f32: 0.000000e+00> : tile<128x128xf32>
  %cst_0_i32_23 = constant <i32: 0> : tile<i32>
  %cst_1_i32_24 = constant <i32: 1> : tile<i32>
  %pview_25 = make_partition_view %tview : partition_view<tile=(128x32), padding_value = zero, tensor_view<?x?xf16, strides=[?,1]>>
  %pview_26 = make_partition_view %tview_13 : partition_view<tile=(32x128), padding_value = zero, tensor_view<?x?xf16, strides=[?,1]>>
  %pview_27 = make_partition_view %tview_18 : partition_view<tile=(128x128), tensor_view<?x?xf16, strides=[?,1]>>
  %for = for %loopIdx in (%blockId_x to %4, step %gridSize_x) : tile<i32> iter_values(%iterArg0 = %0) -> (token) {
    %8 = divi %loopIdx, %5 signed rounding<negative_inf> : tile<i32>
    %9 = muli %8, %cst_8_i32 : tile<i32>
    %10 = subi %1#0, %9 : tile<i32>
    %11 = mini %10, %cst_8_i32 signed : tile<i32>
    %12 = remi %loopIdx, %5 signed : tile<i32>
    %13 = cmpi less_than %12, %cst_0_i32, signed : tile<i32> -> tile<i1>
    %14 = xori %13, %6 : tile<i1>
    %15 = cmpi not_equal %12, %cst_0_i32, signed : tile<i32> -> tile<i1>
    %16 = andi %14, %15 : tile<i1>
    %17 = addi %12, %5 : tile<i32>
    %18 = select %16, %17, %12 : tile<i1>, tile<i32>
    %19 = remi %18, %11 signed : tile<i32>
    %20 = cmpi less_than %19, %cst_0_i32_21, signed : tile<i32> -> tile<i1>
    %21 = cmpi less_than %11, %cst_0_i32_21, signed : tile<i32> -> tile<i1>
    %22 = xori %20, %21 : tile<i1>
    %23 = cmpi not_equal %19, %cst_0_i32_21, signed : tile<i32> -> tile<i1>
    %24 = andi %22, %23 : tile<i1>
    %25 = addi %19, %11 : tile<i32>
    %26 = select %24, %25, %19 : tile<i1>, tile<i32>
    %27 = addi %9, %26 : tile<i32>
    %28 = remi %loopIdx, %5 signed : tile<i32>
    %29 = cmpi less_than %28, %cst_0_i32_22, signed : tile<i32> -> tile<i1>
    %30 = xori %29, %7 : tile<i1>
    %31 = cmpi not_equal %28, %cst_0_i32_22, signed : tile<i32> -> tile<i1>
    %32 = andi %30, %31 : tile<i1>
    %33 = addi %28, %5 : tile<i32>
    %34 = select %32, %33, %28 : tile<i1>, tile<i32>
    %35 = divi %34, %11 signed rounding<negative_inf> : tile<i32>
    %for_28 = for %loopIdx_29 in (%cst_0_i32_23 to %3#1, step %cst_1_i32_24) : tile<i32> iter_values(%iterArg0_30 = %cst_0_f32) -> (tile<128x128xf32>) {
      %tile, %result_token = load_view_tko weak %pview_25[%27, %loopIdx_29] token = %0 optimization_hints = <default = {latency = 4}> : partition_view<tile=(128x32), padding_value = zero, tensor_view<?x?xf16, strides=[?,1]>>, tile<i32> -> tile<128x32xf16>, token
      %tile_31, %result_token_32 = load_view_tko weak %pview_26[%loopIdx_29, %35] token = %0 : partition_view<tile=(32x128), padding_value = zero, tensor_view<?x?xf16, strides=[?,1]>>, tile<i32> -> tile<32x128xf16>, token
      %38 = mmaf %tile, %tile_31, %iterArg0_30 : tile<128x32xf16>, tile<32x128xf16>, tile<128x128xf32>
      continue %38 : tile<128x128xf32>
    }
    %36 = ftof %for_28  : tile<128x128xf32> -> tile<128x128xf16>
    %37 = store_view_tko weak %36, %pview_27[%27, %35] token = %iterArg0 : tile<128x128xf16>, partition_view<tile=(128x128), tensor_view<?x?xf16, strides=[?,1]>>, tile<i32> -> token
    continue %37 : token
  }
  return
}
