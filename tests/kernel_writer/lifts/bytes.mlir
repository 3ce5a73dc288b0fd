// Bytes to values: unpack (`ct.unpack_from_bytes(x, dtype)` to a non-byte dtype) is
// cutile-rs's unpack, its element type from the annotated result.
// RESULT: %v
// CHECK: let unpacked: Tile<f32, { [16] }> = unpack(narrow);
  %n = ftoi %t signed : tile<64xf32> -> tile<64xi32>
  %b = trunci %n overflow<no_signed_wrap> : tile<64xi32> -> tile<64xi8>
  %u = unpack %b : tile<64xi8> -> tile<16xf32>
  %r = reshape %u : tile<16xf32> -> tile<16x1xf32>
  %bc = broadcast %r : tile<16x1xf32> -> tile<16x4xf32>
  %v = reshape %bc : tile<16x4xf32> -> tile<64xf32>
