// An op no cutile-rs construct is mapped for refuses the kernel, naming the op
// (fpowi: cuTile writes it from bytecode 13.4 on, and ports are proven at 13.3, G19).
// RESULT: %t
// BLOCKED: fpowi: no cutile-rs construct
  %i = iota : tile<64xi32>
  %p = fpowi %t, %i : tile<64xf32>, tile<64xi32>
