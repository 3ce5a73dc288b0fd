// A scan whose body is addf with identity 0 along dim 0 is scan_sum
// (test_lifter.py has dim 1, which cutile-rs cannot scan along).
// RESULT: %c
// CHECK: let scanned: Tile<f32, { [64] }> = scan_sum(tile, 0i32, reverse::Forward, 0.0f32);
  %c = scan %t dim=0 reverse=false identities=[0.000000e+00 : f32] : tile<64xf32> -> tile<64xf32>
  (%a: tile<f32>, %b: tile<f32>) {
    %m = addf %a, %b  : tile<f32>
    yield %m : tile<f32>
  }
