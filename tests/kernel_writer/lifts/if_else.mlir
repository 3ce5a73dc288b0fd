// An if with one result is an if-expression; rank-0 integer values stay Rust
// scalars until an op needs a tile.
// RESULT: %v
// CHECK: let rem: i32 = tile_to_scalar::<i32, i32>(pid.0) % tile_to_scalar::<i32, i32>(cst_1);
// CHECK-NEXT: let cond: bool = rem == tile_to_scalar::<i32, i32>(cst);
// CHECK-NEXT: let chosen: i32 = if cond {
// CHECK-NEXT: let quot: Tile<i32, { [] }> = divi(pid.0, cst_1, rounding::NegativeInf);
// CHECK-NEXT: tile_to_scalar::<i32, i32>(quot)
// CHECK-NEXT: } else {
// CHECK-NEXT: let mul: i32 = tile_to_scalar::<i32, i32>(pid.0) * tile_to_scalar::<i32, i32>(cst_1);
// CHECK-NEXT: mul
// CHECK-NEXT: };
// CHECK-NEXT: itof(scalar_to_tile::<i32>(chosen), rounding::NearestEven);
  %c0 = constant <i32: 0> : tile<i32>
  %c2 = constant <i32: 2> : tile<i32>
  %r = remi %bx, %c2 signed : tile<i32>
  %even = cmpi equal %r, %c0, signed : tile<i32> -> tile<i1>
  %k = if %even -> (tile<i32>) {
    %h = divi %bx, %c2 signed rounding<negative_inf> : tile<i32>
    yield %h : tile<i32>
  } else {
    %d = muli %bx, %c2 : tile<i32>
    yield %d : tile<i32>
  }
  %kf = itof %k signed : tile<i32> -> tile<f32>
  %kr = reshape %kf : tile<f32> -> tile<1xf32>
  %kb = broadcast %kr : tile<1xf32> -> tile<64xf32>
  %v = addf %t, %kb : tile<64xf32>
