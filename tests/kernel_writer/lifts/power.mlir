// Python's power operator (`x ** 2`, `x ** y` on float tiles): cuTile emits fpowf
// with the exponent broadcast to the tile; cutile-rs writes it as a function.
// RESULT: %p
// CHECK: let cst: Tile<f32, { [64] }> = constant(2.0f32, shape![64]);
// CHECK-NEXT: let fpowf_1: Tile<f32, { [64] }> = fpowf(tile, cst);
// CHECK-NEXT: = fpowf(fpowf_1, tile);
  %c = constant <f32: 2.000000e+00> : tile<64xf32>
  %sq = fpowf %t, %c : tile<64xf32>
  %p = fpowf %sq, %t : tile<64xf32>
