// ct.cat((a, b), axis): cutile-rs's cat with the dim as an i32; the result's shape
// is the binding's type.
// RESULT: %j
// CHECK: let joined: Tile<f32, { [128] }> = cat(tile, tile, 0i32);
  %j = cat %t, %t dim = 0 : tile<64xf32>, tile<64xf32> -> tile<128xf32>
