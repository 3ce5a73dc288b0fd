// A tensor view's extents (get_tensor_shape, which no cuTile Python API writes):
// cutile-rs's get_tensor_shape, one array, each extent an element of it.
// RESULT: %v
// CHECK: let x_extents: [i32; 1] = get_tensor_shape(&x_view);
// CHECK-NEXT: = itof(scalar_to_tile::<i32>(x_extents[0]), rounding::NearestEven);
  %e = get_tensor_shape %tv : tensor_view<?xf32, strides=[1]> -> tile<i32>
  %c = itof %e signed : tile<i32> -> tile<f32>
  %r = reshape %c : tile<f32> -> tile<1xf32>
  %bc = broadcast %r : tile<1xf32> -> tile<64xf32>
  %v = addf %t, %bc : tile<64xf32>
