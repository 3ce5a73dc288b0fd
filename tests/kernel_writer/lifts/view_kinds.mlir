// Tiled views beyond the partition view: tiles 128 elements apart
// (`array.tiled_view(shape, traversal_steps=..)`, make_strided_view) and a tiled
// view's atomic add (`atomic_store_add`, atomic_red_view_tko) into y's tiles.
// RESULT: %t
// CHECK: let x_strided: StridedView<f32, { [64] }, { [128] }, { [0] }> =
// CHECK-NEXT: make_strided_view(&x_view, shape![64], padding::Zero);
// CHECK: &x_strided,
// CHECK: let reduced: Token = atomic_red_view_raw(
// CHECK-NEXT: &y_tiles,
// CHECK-NEXT: tile_1,
// CHECK-NEXT: [tile_to_scalar::<i32, i32>(pid.0)],
// CHECK-NEXT: atomic::AddF,
// CHECK-NEXT: ordering::Relaxed,
// CHECK-NEXT: scope::Device,
// CHECK-NEXT: Some(token),
  %sv = make_strided_view %tv : strided_view<tile=(64), traversal_strides=[128], padding_value = zero, tensor_view<?xf32, strides=[1]>>
  %st, %stok = load_view_tko weak %sv[%bx] token = %0 : strided_view<tile=(64), traversal_strides=[128], padding_value = zero, tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<64xf32>, token
  %rv = make_partition_view %tv2 : partition_view<tile=(64), tensor_view<?xf32, strides=[1]>>
  %red = atomic_red_view_tko relaxed device %rv[%bx], addf, %st token = %0 : tile<64xf32>, partition_view<tile=(64), tensor_view<?xf32, strides=[1]>>, tile<i32> -> token
  %j = join_tokens %red, %stok : token
