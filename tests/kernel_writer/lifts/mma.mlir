// Matrix multiply-accumulate: mmaf with an f32 accumulator over f16 operands.
// RESULT: %flat
// CHECK: let reshaped: Tile<f16, { [8, 8] }> = converted.reshape(shape![8, 8]);
// CHECK-NEXT: let cst: Tile<f32, { [8, 8] }> = constant(0.0f32, shape![8, 8]);
// CHECK-NEXT: let acc: Tile<f32, { [8, 8] }> = mmaf(reshaped, reshaped, cst);
  %h = ftof %t : tile<64xf32> -> tile<64xf16>
  %a = reshape %h : tile<64xf16> -> tile<8x8xf16>
  %z = constant <f32: 0.000000e+00> : tile<8x8xf32>
  %acc = mmaf %a, %a, %z : tile<8x8xf16>, tile<8x8xf16>, tile<8x8xf32>
  %flat = reshape %acc : tile<8x8xf32> -> tile<64xf32>
