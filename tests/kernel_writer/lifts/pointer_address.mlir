// A pointer tile's addresses (ptr_to_int, which no cuTile Python API writes): the
// module's declared ptr_to_int_rN, since cutile-rs's own ptr_to_int types the
// result as the pointee type, not i64.
// RESULT: %v
// CHECK: let reshaped: PointerTile<*mut f32, { [1] }> = x.reshape(shape![1]);
// CHECK: let address: Tile<i64, { [64] }> = ptr_to_int_r1(
// CHECK-NEXT: = itof(address, rounding::NearestEven);
  %r = reshape %arg0 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %b = broadcast %r : tile<1xptr<f32>> -> tile<64xptr<f32>>
  %a = ptr_to_int %b : tile<64xptr<f32>> -> tile<64xi64>
  %f = itof %a signed : tile<64xi64> -> tile<64xf32>
  %v = addf %t, %f : tile<64xf32>
