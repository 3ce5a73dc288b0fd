// Scratch memory (alloca, which no cuTile Python API writes): cutile-rs's alloca
// with the element count and alignment as given, block-local or global, its
// pointee type from the annotated pointer tile; a store and load through it.
// RESULT: %v
// CHECK: let scratch: PointerTile<*mut f32, { [] }> = alloca(64i64, 16i64, allocation::Local);
// CHECK: = alloca(8i64, 128i64, allocation::Global);
  %a = alloca num_elem = 64, alignment = 16 : tile<ptr<f32>>
  %g = alloca num_elem = 8, alignment = 128 global : tile<ptr<i32>>
  %r = reshape %a : tile<ptr<f32>> -> tile<1xptr<f32>>
  %b = broadcast %r : tile<1xptr<f32>> -> tile<64xptr<f32>>
  %i = iota : tile<64xi32>
  %p = offset %b, %i : tile<64xptr<f32>>, tile<64xi32> -> tile<64xptr<f32>>
  %st = store_ptr_tko weak %p, %t token=%0 : tile<64xptr<f32>>, tile<64xf32> -> token
  %v, %tl = load_ptr_tko weak %p token=%st : tile<64xptr<f32>> -> tile<64xf32>, token
