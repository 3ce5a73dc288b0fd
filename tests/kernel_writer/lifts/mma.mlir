// Matrix multiply-accumulate: mmaf with an f32 accumulator over f16 operands, and
// mmai (ct.mma on int8 tiles) with an i32 accumulator, each operand's signedness
// stated by the op (here signed lhs, unsigned rhs).
// RESULT: %flat
// CHECK: let reshaped: Tile<f16, { [8, 8] }> = converted.reshape(shape![8, 8]);
// CHECK-NEXT: let cst: Tile<f32, { [8, 8] }> = constant(0.0f32, shape![8, 8]);
// CHECK-NEXT: let acc: Tile<f32, { [8, 8] }> = mmaf(reshaped, reshaped, cst);
// CHECK: let reshaped_1: Tile<i8, { [8, 8] }> = narrow.reshape(shape![8, 8]);
// CHECK-NEXT: let cst_1: Tile<i32, { [8, 8] }> = constant(0i32, shape![8, 8]);
// CHECK-NEXT: = mmai(reshaped_1, reshaped_1, cst_1, signedness::Signed, signedness::Unsigned);
  %h = ftof %t : tile<64xf32> -> tile<64xf16>
  %a = reshape %h : tile<64xf16> -> tile<8x8xf16>
  %z = constant <f32: 0.000000e+00> : tile<8x8xf32>
  %acc = mmaf %a, %a, %z : tile<8x8xf16>, tile<8x8xf16>, tile<8x8xf32>
  %n = ftoi %t signed : tile<64xf32> -> tile<64xi32>
  %b = trunci %n overflow<no_signed_wrap> : tile<64xi32> -> tile<64xi8>
  %bm = reshape %b : tile<64xi8> -> tile<8x8xi8>
  %zi = constant <i32: 0> : tile<8x8xi32>
  %iacc = mmai %bm, %bm, %zi signed unsigned : tile<8x8xi8>, tile<8x8xi8>, tile<8x8xi32>
  %ia = reshape %iacc : tile<8x8xi32> -> tile<64xi32>
  %if = itof %ia signed : tile<64xi32> -> tile<64xf32>
  %flat0 = reshape %acc : tile<8x8xf32> -> tile<64xf32>
  %flat = addf %flat0, %if : tile<64xf32>
