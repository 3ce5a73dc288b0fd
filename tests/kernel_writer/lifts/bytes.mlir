// Values to bytes and back: pack (`ct.pack_to_bytes(x)`) and unpack
// (`ct.unpack_from_bytes(x, dtype)` to a non-byte dtype) are cutile-rs's pack and
// unpack, each with its element type from the annotated result.
// RESULT: %v
// CHECK: let unpacked: Tile<f32, { [16] }> = unpack(narrow);
// CHECK: let packed: Tile<i8, { [256] }> = pack(tile);
// CHECK-NEXT: let unpacked_1: Tile<f32, { [64] }> = unpack(packed);
  %n = ftoi %t signed : tile<64xf32> -> tile<64xi32>
  %b = trunci %n overflow<no_signed_wrap> : tile<64xi32> -> tile<64xi8>
  %u = unpack %b : tile<64xi8> -> tile<16xf32>
  %r = reshape %u : tile<16xf32> -> tile<16x1xf32>
  %bc = broadcast %r : tile<16x1xf32> -> tile<16x4xf32>
  %q = reshape %bc : tile<16x4xf32> -> tile<64xf32>
  %p = pack %t : tile<64xf32> -> tile<256xi8>
  %w = unpack %p : tile<256xi8> -> tile<64xf32>
  %v = addf %q, %w : tile<64xf32>
