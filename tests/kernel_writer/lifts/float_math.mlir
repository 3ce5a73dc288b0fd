// Float arithmetic: an operator where the op has its default flags, the
// function form with rounding and flush-to-zero as arguments where not;
// atan2 (`ct.atan2(y, x)`) keeps its operands' order.
// RESULT: %z
// CHECK: let cst: Tile<f32, { [64] }> = constant(2.5f32, shape![64]);
// CHECK-NEXT: let mul: Tile<f32, { [64] }> = tile * cst;
// CHECK-NEXT: = fma(mul, tile, cst, rounding::NearestEven, ftz::Disabled);
// CHECK-NEXT: = negf(fma_1);
// CHECK-NEXT: = absf(neg);
// CHECK-NEXT: = sqrt(abs, rounding::NearestEven, ftz::Disabled);
// CHECK-NEXT: = rsqrt(sqrt_1, ftz::Enabled);
// CHECK-NEXT: = exp2(rsqrt_1, ftz::Enabled);
// CHECK-NEXT: = maxf(exp2_1, tile, nan::Disabled, ftz::Disabled);
// CHECK-NEXT: let sub: Tile<f32, { [64] }> = subf(maxf_1, tile, rounding::Zero, ftz::Disabled);
// CHECK-NEXT: let angle: Tile<f32, { [64] }> = atan2(sub, tile);
  %c = constant <f32: 2.500000e+00> : tile<64xf32>
  %m = mulf %t, %c rounding<nearest_even> : tile<64xf32>
  %f = fma %m, %t, %c : tile<64xf32>
  %n = negf %f : tile<64xf32>
  %a = absf %n : tile<64xf32>
  %q = sqrt %a : tile<64xf32>
  %r = rsqrt %q flush_to_zero : tile<64xf32>
  %e = exp2 %r flush_to_zero : tile<64xf32>
  %x = maxf %e, %t : tile<64xf32>
  %y = subf %x, %t rounding<zero> : tile<64xf32>
  %z = atan2 %y, %t : tile<64xf32>
