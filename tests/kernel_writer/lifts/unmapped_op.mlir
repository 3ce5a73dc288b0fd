// An op no cutile-rs construct is mapped for refuses the kernel, naming the op.
// RESULT: %b
// BLOCKED: bitcast: no cutile-rs construct
  %b = bitcast %t : tile<64xf32> -> tile<64xi32>
