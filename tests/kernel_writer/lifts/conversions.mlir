// Conversions: float width both ways, float to int (truncation, Tile IR's
// unprinted default), integer width both ways, int to float, and the bits of a
// float as an integer and back (bitcast, its target type from the annotation).
// A trunci without overflow flags calls the op the module declares (UPSTREAM_GAPS.md G3).
// RESULT: %again
// CHECK: let converted: Tile<f16, { [64] }> = ftof(tile, rounding::NearestEven);
// CHECK-NEXT: let converted: Tile<f32, { [64] }> = ftof(converted, rounding::NearestEven);
// CHECK-NEXT: let as_int: Tile<i32, { [64] }> = ftoi(converted, rounding::NearestIntToZero);
// CHECK-NEXT: let wide: Tile<i64, { [64] }> = exti(as_int);
// CHECK-NEXT: let narrow: Tile<i16, { [64] }> = trunci_plain_r1(wide);
// CHECK-NEXT: let as_float: Tile<f16, { [64] }> = itof(narrow, rounding::NearestEven);
// CHECK-NEXT: let converted_1: Tile<f32, { [64] }> = ftof(as_float, rounding::NearestEven);
// CHECK-NEXT: let bits: Tile<i32, { [64] }> = bitcast(converted_1);
// CHECK-NEXT: let bits: Tile<f32, { [64] }> = bitcast(bits);
  %half = ftof %t : tile<64xf32> -> tile<64xf16>
  %wide = ftof %half : tile<64xf16> -> tile<64xf32>
  %n = ftoi %wide signed : tile<64xf32> -> tile<64xi32>
  %l = exti %n signed : tile<64xi32> -> tile<64xi64>
  %h = trunci %l : tile<64xi64> -> tile<64xi16>
  %f = itof %h signed : tile<64xi16> -> tile<64xf16>
  %back = ftof %f : tile<64xf16> -> tile<64xf32>
  %raw = bitcast %back : tile<64xf32> -> tile<64xi32>
  %again = bitcast %raw : tile<64xi32> -> tile<64xf32>
