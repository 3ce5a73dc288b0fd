// Integer and bit ops on an iota, a compare and a select: Rust's operators
// where the op has one meaning for the signed type, functions where it has flags;
// negi (cuTile's `-x`) is always a function, with overflow::None for no flag;
// mulhii (the high half of a product) is a function; assert (`ct.assert_`) is
// cutile-rs's macro, its message unescaped from MLIR and escaped for Rust.
// (The wrapping kernel stores through %s and %pv2: a body names neither.)
// RESULT: %v
// CHECK: let lanes: Tile<i32, { [64] }> = iota(shape![64]);
// CHECK-NEXT: let cst: Tile<i32, { [64] }> = constant(5i32, shape![64]);
// CHECK-NEXT: let and: Tile<i32, { [64] }> = lanes & cst;
// CHECK-NEXT: let shl: Tile<i32, { [64] }> = and << cst;
// CHECK-NEXT: let xor: Tile<i32, { [64] }> = shl ^ lanes;
// CHECK-NEXT: let shr: Tile<i32, { [64] }> = xor >> cst;
// CHECK-NEXT: = mini(shr, lanes);
// CHECK-NEXT: let quot: Tile<i32, { [64] }> = mini_1 / cst;
// CHECK-NEXT: let neg: Tile<i32, { [64] }> = negi(quot, overflow::None);
// CHECK-NEXT: let neg: Tile<i32, { [64] }> = negi(neg, overflow::NoSignedWrap);
// CHECK-NEXT: let high: Tile<i32, { [64] }> = mulhii(neg, lanes);
// CHECK-NEXT: let cond: Tile<bool, { [64] }> = cmpi(high, cst, predicate::GreaterThanOrEqual);
// CHECK-NEXT: cuda_tile_assert!(cond, "lanes \"ok\"\n");
// CHECK-NEXT: let picked: Tile<f32, { [64] }> = select(cond, tile, tile);
  %i = iota : tile<64xi32>
  %c5 = constant <i32: 5> : tile<64xi32>
  %a = andi %i, %c5 : tile<64xi32>
  %sh = shli %a, %c5 : tile<64xi32>
  %x = xori %sh, %i : tile<64xi32>
  %r = shri %x, %c5 signed : tile<64xi32>
  %m = mini %r, %i signed : tile<64xi32>
  %q = divi %m, %c5 signed : tile<64xi32>
  %ng = negi %q : tile<64xi32>
  %ngw = negi %ng overflow<no_signed_wrap> : tile<64xi32>
  %hi = mulhii %ngw, %i : tile<64xi32>
  %u = cmpi greater_than_or_equal %hi, %c5, signed : tile<64xi32> -> tile<64xi1>
  assert %u, "lanes \22ok\22\0A" : tile<64xi1>
  %v = select %u, %t, %t : tile<64xi1>, tile<64xf32>
