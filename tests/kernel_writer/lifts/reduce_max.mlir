// A reduction whose body is maxf and whose identity is -inf is reduce_max
// (test_lifter.py has the sum, and an identity no helper has).
// RESULT: %rb
// CHECK: let reduced: Tile<f32, { [] }> = reduce_max(tile, 0i32);
// CHECK-NEXT: let reshaped: Tile<f32, { [1] }> = reduced.reshape(shape![1]);
// CHECK-NEXT: let bcast: Tile<f32, { [64] }> = reshaped.broadcast(shape![64]);
  %r = reduce %t dim=0 identities=[0xFF800000 : f32] : tile<64xf32> -> tile<f32>
  (%a: tile<f32>, %b: tile<f32>) {
    %m = maxf %a, %b : tile<f32>
    yield %m : tile<f32>
  }
  %rr = reshape %r : tile<f32> -> tile<1xf32>
  %rb = broadcast %rr : tile<1xf32> -> tile<64xf32>
