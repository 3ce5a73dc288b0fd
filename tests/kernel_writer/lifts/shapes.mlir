// Shape ops: reshape and broadcast as methods, permute with its order as a
// const array, extract at rank-0 index tiles.
// RESULT: %flat
// CHECK: let reshaped: Tile<f32, { [8, 8] }> = tile.reshape(shape![8, 8]);
// CHECK-NEXT: let permuted: Tile<f32, { [8, 8] }> = permute(reshaped, const_array![1, 0]);
// CHECK-NEXT: let cst: Tile<i32, { [] }> = constant(0i32, shape![]);
// CHECK-NEXT: let cst_1: Tile<i32, { [] }> = constant(1i32, shape![]);
// CHECK-NEXT: let part: Tile<f32, { [1, 8] }> = extract(permuted, [cst_1, cst]);
// CHECK-NEXT: let bcast: Tile<f32, { [8, 8] }> = part.broadcast(shape![8, 8]);
// CHECK-NEXT: let add: Tile<f32, { [8, 8] }> = permuted + bcast;
// CHECK-NEXT: let reshaped_1: Tile<f32, { [64] }> = add.reshape(shape![64]);
  %sq = reshape %t : tile<64xf32> -> tile<8x8xf32>
  %tr = permute %sq [1, 0] : tile<8x8xf32> -> tile<8x8xf32>
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %row = extract %tr[%c1, %c0] : tile<8x8xf32> -> tile<1x8xf32>
  %rows = broadcast %row : tile<1x8xf32> -> tile<8x8xf32>
  %sum = addf %tr, %rows : tile<8x8xf32>
  %flat = reshape %sum : tile<8x8xf32> -> tile<64xf32>
