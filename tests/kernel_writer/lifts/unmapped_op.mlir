// An op no cutile-rs construct is mapped for refuses the kernel, naming the op.
// RESULT: %t
// BLOCKED: pack: no cutile-rs construct
  %b = pack %t : tile<64xf32> -> tile<256xi8>
