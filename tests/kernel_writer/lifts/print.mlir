// Printing (`ct.printf(format, tile)`): cutile-rs's print_tko with the format
// unescaped from MLIR and escaped for Rust, and the reference's input token.
// RESULT: %t
// CHECK: let printed: Token = print_tko("x = %f\n", tile, Some(
// CHECK-NEXT: = join_tokens(&[
  %p = print_tko "x = %f\0A", %t token=%0 : tile<64xf32> -> token
  %j = join_tokens %0, %p : token
