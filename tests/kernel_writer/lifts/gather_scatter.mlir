// Gather and scatter through pointer tiles: a broadcast base pointer offset by
// lanes, a masked load padded with zero (the module's declared load, G12), a
// masked store.
// RESULT: %g
// CHECK: let cond: Tile<bool, { [64] }> = cmpi(lanes, bcast, predicate::LessThan);
// CHECK-NEXT: let wide: Tile<i64, { [64] }> = exti(lanes);
// CHECK-NEXT: let reshaped_1: PointerTile<*mut f32, { [1] }> = x.reshape(shape![1]);
// CHECK-NEXT: let bcast_1: PointerTile<*mut f32, { [64] }> = reshaped_1.broadcast(shape![64]);
// CHECK-NEXT: let ptrs: PointerTile<*mut f32, { [64] }> = addptr_tile(bcast_1, wide);
// CHECK: = load_ptr_padded_r1(
// CHECK: Some(cond),
// CHECK-NEXT: Some(cst),
// CHECK: let ptrs_1: PointerTile<*mut f32, { [64] }> = addptr_tile(bcast_2, wide);
// CHECK-NEXT: = store_ptr_tko(
// CHECK-NEXT: ptrs_1,
// CHECK-NEXT: loaded,
// CHECK: Some(cond),
  %i = iota : tile<64xi32>
  %n = reshape %arg1 : tile<i32> -> tile<1xi32>
  %nb = broadcast %n : tile<1xi32> -> tile<64xi32>
  %in = cmpi less_than %i, %nb, signed : tile<64xi32> -> tile<64xi1>
  %w = exti %i signed : tile<64xi32> -> tile<64xi64>
  %p1 = reshape %arg0 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %pb = broadcast %p1 : tile<1xptr<f32>> -> tile<64xptr<f32>>
  %ptrs = offset %pb, %w : tile<64xptr<f32>>, tile<64xi64> -> tile<64xptr<f32>>
  %z = constant <f32: 0.000000e+00> : tile<64xf32>
  %g, %gt = load_ptr_tko weak %ptrs, %in, %z token=%0 : tile<64xptr<f32>>, tile<64xi1>, tile<64xf32> -> tile<64xf32>, token
  %q1 = reshape %arg3 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %qb = broadcast %q1 : tile<1xptr<f32>> -> tile<64xptr<f32>>
  %qs = offset %qb, %w : tile<64xptr<f32>>, tile<64xi64> -> tile<64xptr<f32>>
  %st = store_ptr_tko weak %qs, %g, %in token=%0 : tile<64xptr<f32>>, tile<64xf32>, tile<64xi1> -> token
