// Matrix multiply-accumulate: mmaf with an f32 accumulator over f16 operands, and
// mmai (ct.mma on int8 tiles) with an i32 accumulator, each operand's signedness
// stated by the op (here signed lhs, unsigned rhs), and mmaf_scaled (ct.mma_scaled on
// float8 tiles with float8_e8m0fnu block scales) with its operands in the op's order
// (lhs, rhs, acc, lhs_scale, rhs_scale) and the accumulator's type as its result's.
// RESULT: %flat
// CHECK: let reshaped: Tile<f16, { [8, 8] }> = converted.reshape(shape![8, 8]);
// CHECK-NEXT: let cst: Tile<f32, { [8, 8] }> = constant(0.0f32, shape![8, 8]);
// CHECK-NEXT: let acc: Tile<f32, { [8, 8] }> = mmaf(reshaped, reshaped, cst);
// CHECK: let reshaped_1: Tile<i8, { [8, 8] }> = narrow.reshape(shape![8, 8]);
// CHECK-NEXT: let cst_1: Tile<i32, { [8, 8] }> = constant(0i32, shape![8, 8]);
// CHECK-NEXT: = mmai(reshaped_1, reshaped_1, cst_1, signedness::Signed, signedness::Unsigned);
// CHECK: let part: Tile<f8e8m0fnu, { [2, 1] }> = extract(reshaped_5, [cst_2, cst_2]);
// CHECK-NEXT: let part_1: Tile<f8e8m0fnu, { [1, 2] }> = extract(reshaped_6, [cst_2, cst_2]);
// CHECK-NEXT: let cst_3: Tile<f32, { [2, 2] }> = constant(0.0f32, shape![2, 2]);
// CHECK-NEXT: let acc_2: Tile<f32, { [2, 2] }> = mmaf_scaled(reshaped_3, reshaped_4, cst_3, part, part_1);
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
  %q = ftof %t : tile<64xf32> -> tile<64xf8E4M3FN>
  %qa = reshape %q : tile<64xf8E4M3FN> -> tile<2x32xf8E4M3FN>
  %qb = reshape %q : tile<64xf8E4M3FN> -> tile<32x2xf8E4M3FN>
  %e = ftof %t : tile<64xf32> -> tile<64xf8E8M0FNU>
  %ea = reshape %e : tile<64xf8E8M0FNU> -> tile<2x32xf8E8M0FNU>
  %eb = reshape %e : tile<64xf8E8M0FNU> -> tile<32x2xf8E8M0FNU>
  %c0 = constant <i32: 0> : tile<i32>
  %sa = extract %ea[%c0, %c0] : tile<2x32xf8E8M0FNU> -> tile<2x1xf8E8M0FNU>
  %sb = extract %eb[%c0, %c0] : tile<32x2xf8E8M0FNU> -> tile<1x2xf8E8M0FNU>
  %zs = constant <f32: 0.000000e+00> : tile<2x2xf32>
  %sacc = mmaf_scaled %qa, %qb, %zs, %sa, %sb : tile<2x32xf8E4M3FN>, tile<32x2xf8E4M3FN>, tile<2x2xf32>, tile<2x1xf8E8M0FNU>, tile<1x2xf8E8M0FNU>
  %sc = reshape %sacc : tile<2x2xf32> -> tile<4x1xf32>
  %sbc = broadcast %sc : tile<4x1xf32> -> tile<4x16xf32>
  %sf = reshape %sbc : tile<4x16xf32> -> tile<64xf32>
  %flat0 = reshape %acc : tile<8x8xf32> -> tile<64xf32>
  %flat1 = addf %flat0, %if : tile<64xf32>
  %flat = addf %flat1, %sf : tile<64xf32>
