// A pointer tile's pointee type changed (ptr_to_ptr, which no cuTile Python API
// writes): cutile-rs's ptr_to_ptr, its pointee type from the annotated result, and a
// load through the cast pointer.
// RESULT: %v
// CHECK: let cast: PointerTile<*mut i32, { [] }> = ptr_to_ptr(x);
// CHECK-NEXT: let reshaped: PointerTile<*mut i32, { [1] }> = cast.reshape(shape![1]);
  %p = ptr_to_ptr %arg0 : tile<ptr<f32>> -> tile<ptr<i32>>
  %r = reshape %p : tile<ptr<i32>> -> tile<1xptr<i32>>
  %b = broadcast %r : tile<1xptr<i32>> -> tile<64xptr<i32>>
  %l, %tl = load_ptr_tko weak %b token=%0 : tile<64xptr<i32>> -> tile<64xi32>, token
  %v = itof %l signed : tile<64xi32> -> tile<64xf32>
