// Math functions without attributes (sin, cos, tan, sinh, cosh, floor, ceil, absi)
// and remf (`a % b` on floats), each its cutile-rs function.
// RESULT: %rm
// CHECK: = sin(tile);
// CHECK-NEXT: = cos(sin_1);
// CHECK-NEXT: = tan(cos_1);
// CHECK-NEXT: = sinh(tan_1);
// CHECK-NEXT: = cosh(sinh_1);
// CHECK-NEXT: = floor(cosh_1);
// CHECK-NEXT: = ceil(floor_1);
// CHECK-NEXT: = remf(ceil_1, tile);
  %sn = sin %t : tile<64xf32>
  %c = cos %sn : tile<64xf32>
  %tn = tan %c : tile<64xf32>
  %sh = sinh %tn : tile<64xf32>
  %ch = cosh %sh : tile<64xf32>
  %fl = floor %ch : tile<64xf32>
  %ce = ceil %fl : tile<64xf32>
  %rm = remf %ce, %t : tile<64xf32>
