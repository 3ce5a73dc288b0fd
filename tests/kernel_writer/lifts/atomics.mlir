// An atomic read-modify-write with its mode, ordering, scope and mask; the grid
// size query; two tokens joined.
// RESULT: %t
// CHECK: let ptrs: PointerTile<*mut f32, { [] }> = addptr_tile(y, pid.0);
// CHECK: = atomic_rmw_tko(
// CHECK-NEXT: ptrs,
// CHECK-NEXT: cst,
// CHECK-NEXT: atomic::AddF,
// CHECK-NEXT: ordering::AcqRel,
// CHECK-NEXT: scope::Device,
// CHECK-NEXT: Some(cst_1),
// CHECK-NEXT: Some(token),
// CHECK: = num_tile_blocks::<i32>();
// CHECK-NEXT: let _joined: Token = join_tokens(&[token, atomic_token]);
  %p = offset %arg3, %bx : tile<ptr<f32>>, tile<i32> -> tile<ptr<f32>>
  %one = constant <f32: 1.000000e+00> : tile<f32>
  %yes = constant <i1: true> : tile<i1>
  %old, %ot = atomic_rmw_tko acq_rel device %p, addf, %one, %yes token=%0 : tile<ptr<f32>>, tile<f32>, tile<i1> -> tile<f32>, token
  %nb0, %nb1, %nb2 = get_num_tile_blocks : tile<i32>
  %joined = join_tokens %0, %ot : token
