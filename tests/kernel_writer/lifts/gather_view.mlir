// PARAMS: table array float32 2; ids array int32 1; out array float32 2
// Rows gathered by a tile of ids (`ct.load_advanced_indexing`,
// make_gather_scatter_view): the view's sparse axis a const generic of its type,
// its index a tuple whose sparse axis is the tile of ids.
// CHECK: let table_gathered: GatherScatterView<f32, { [32, 64] }, 0> =
// CHECK-NEXT: make_gather_scatter_view(&table_view, shape![32, 64], padding::Zero);
// CHECK: &table_gathered,
// CHECK-NEXT: (tile, tile_to_scalar::<i32, i32>(cst)),
entry @k(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<ptr<i32>>, %arg6: tile<i32>, %arg7: tile<i32>, %arg8: tile<ptr<f32>>, %arg9: tile<i32>, %arg10: tile<i32>, %arg11: tile<i32>, %arg12: tile<i32>) optimization_hints=<default = {}> {
  %0 = make_token : token
  %tview = make_tensor_view %arg0, shape = [%arg1, %arg2], strides = [%arg3, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
  %tview_15 = make_tensor_view %arg5, shape = [%arg6], strides = [1] : tile<i32> -> tensor_view<?xi32, strides=[1]>
  %tview_22 = make_tensor_view %arg8, shape = [%arg9, %arg10], strides = [%arg11, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %pview = make_partition_view %tview_15 : partition_view<tile=(32), padding_value = zero, tensor_view<?xi32, strides=[1]>>
  %tile, %result_token = load_view_tko weak %pview[%blockId_x] token = %0 : partition_view<tile=(32), padding_value = zero, tensor_view<?xi32, strides=[1]>>, tile<i32> -> tile<32xi32>, token
  %cst_0_i32 = constant <i32: 0> : tile<i32>
  %gsview = make_gather_scatter_view %tview : gather_scatter_view<tile=(32x64), padding_value = zero, tensor_view<?x?xf32, strides=[?,1]>, sparse_dim=0>
  %tile_23, %result_token_24 = load_view_tko weak %gsview[%tile, %cst_0_i32] token = %0 : gather_scatter_view<tile=(32x64), padding_value = zero, tensor_view<?x?xf32, strides=[?,1]>, sparse_dim=0>, tile<32xi32>, tile<i32> -> tile<32x64xf32>, token
  %cst_0_i32_25 = constant <i32: 0> : tile<i32>
  %pview_26 = make_partition_view %tview_22 : partition_view<tile=(32x64), tensor_view<?x?xf32, strides=[?,1]>>
  %1 = store_view_tko weak %tile_23, %pview_26[%blockId_x, %cst_0_i32_25] token = %0 : tile<32x64xf32>, partition_view<tile=(32x64), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> token
  return
}
