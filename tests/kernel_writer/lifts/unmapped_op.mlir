// An op no cutile-rs construct is mapped for refuses the kernel, naming the op.
// RESULT: %b
// BLOCKED: ptr_to_int: no cutile-rs construct
  %b = ptr_to_int %arg0 : tile<ptr<f32>> -> tile<i64>
