// A whole entry: a 2-D f16 array and an f32 scalar. Launch facts become
// assume calls in the reference's order, shapes and strides the tensor view's,
// a scalar a rank-0 tile where an op needs one.
// PARAMS: x array float16 2; scale scalar float32
// CHECK: let x: PointerTile<*mut f16, { [] }> = pointer_to_tile(x);
// CHECK: let x: PointerTile<*mut f16, { [] }> = assume_div_by::<_, 16>(x);
// CHECK-NEXT: let x_stride_0: i32 = assume_div_by::<_, 8>(x_stride_0);
// CHECK-NEXT: let x_shape_0: i32 = assume_bounds_lower::<_, 0>(x_shape_0);
// CHECK-NEXT: let x_shape_1: i32 = assume_bounds_lower::<_, 0>(x_shape_1);
// CHECK-NEXT: let x_stride_0: i32 = assume_bounds_lower::<_, 0>(x_stride_0);
// CHECK: dims: &[x_stride_0, 1i32],
// CHECK: let x_view: Tensor<f16, { [-1, -1] }> =
// CHECK: let x_tiles: Partition<f16, { [16, 32] }> = make_partition_view(
// CHECK: [tile_to_scalar::<i32, i32>(pid.0), tile_to_scalar::<i32, i32>(pid.1)],
// CHECK: let reshaped: Tile<f32, { [1, 1] }> = scalar_to_tile::<f32>(scale).reshape(shape![1, 1]);
// CHECK: let converted_1: Tile<f16, { [16, 32] }> = ftof(mul, rounding::NearestEven);
// CHECK-NEXT: let _stored: Token = store_view_raw(
// CHECK-NEXT: &x_tiles,
entry @k(%arg0: tile<ptr<f16>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<f32>) optimization_hints=<default = {}> {
  %0 = make_token : token
  %a0 = assume div_by<16>, %arg0 : tile<ptr<f16>>
  %a3 = assume div_by<8>, %arg3 : tile<i32>
  %b1 = assume bounded<0, ?>, %arg1 : tile<i32>
  %b2 = assume bounded<0, ?>, %arg2 : tile<i32>
  %b3 = assume bounded<0, ?>, %a3 : tile<i32>
  %tv = make_tensor_view %a0, shape = [%b1, %b2], strides = [%b3, 1] : tile<i32> -> tensor_view<?x?xf16, strides=[?,1]>
  %bx, %by, %bz = get_tile_block_id : tile<i32>
  %pv = make_partition_view %tv : partition_view<tile=(16x32), tensor_view<?x?xf16, strides=[?,1]>>
  %t, %tok = load_view_tko weak %pv[%bx, %by] token = %0 : partition_view<tile=(16x32), tensor_view<?x?xf16, strides=[?,1]>>, tile<i32> -> tile<16x32xf16>, token
  %f = ftof %t : tile<16x32xf16> -> tile<16x32xf32>
  %sr = reshape %arg5 : tile<f32> -> tile<1x1xf32>
  %sb = broadcast %sr : tile<1x1xf32> -> tile<16x32xf32>
  %m = mulf %f, %sb : tile<16x32xf32>
  %h = ftof %m : tile<16x32xf32> -> tile<16x32xf16>
  %st = store_view_tko weak %h, %pv[%bx, %by] token = %0 : tile<16x32xf16>, partition_view<tile=(16x32), tensor_view<?x?xf16, strides=[?,1]>>, tile<i32> -> token
  return
}
