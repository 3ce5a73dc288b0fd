// A loop that begins with `if %c {} else { break }` is a while loop; its
// carried values are `let mut` variables assigned at its end.
// RESULT: %v
// CHECK: let mut carried: i32 = tile_to_scalar::<i32, i32>(cst);
// CHECK-NEXT: let mut carried_1: i32 = tile_to_scalar::<i32, i32>(pid.0);
// CHECK-NEXT: while {
// CHECK-NEXT: let cond: bool = carried_1 > tile_to_scalar::<i32, i32>(cst_1);
// CHECK-NEXT: cond
// CHECK-NEXT: } {
// CHECK-NEXT: divi(scalar_to_tile::<i32>(carried_1), cst_2, rounding::NegativeInf);
// CHECK-NEXT: let add: i32 = carried + tile_to_scalar::<i32, i32>(cst_1);
// CHECK-NEXT: carried = add;
// CHECK-NEXT: carried_1 = tile_to_scalar::<i32, i32>(quot);
// CHECK-NEXT: }
// CHECK-NOT: break
// CHECK: itof(scalar_to_tile::<i32>(carried), rounding::NearestEven);
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %c2 = constant <i32: 2> : tile<i32>
  %w:2 = loop iter_values(%steps = %c0, %n = %bx) : tile<i32>, tile<i32> -> tile<i32>, tile<i32> {
    %more = cmpi greater_than %n, %c1, signed : tile<i32> -> tile<i1>
    if %more {
    } else {
      break %steps, %n : tile<i32>, tile<i32>
    }
    %half = divi %n, %c2 signed rounding<negative_inf> : tile<i32>
    %next = addi %steps, %c1 : tile<i32>
    continue %next, %half : tile<i32>, tile<i32>
  }
  %sf = itof %w#0 signed : tile<i32> -> tile<f32>
  %sr = reshape %sf : tile<f32> -> tile<1xf32>
  %sb = broadcast %sr : tile<1xf32> -> tile<64xf32>
  %v = addf %t, %sb : tile<64xf32>
