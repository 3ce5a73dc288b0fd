// ct.atomic_cas: compare-and-swap with its ordering, scope, mask and token; the
// old values come back with the op's token.
// RESULT: %old
// CHECK: = atomic_cas_tko(
// CHECK-NEXT: ptrs,
// CHECK-NEXT: cst,
// CHECK-NEXT: cst_1,
// CHECK-NEXT: ordering::AcqRel,
// CHECK-NEXT: scope::Device,
// CHECK-NEXT: Some(cst_2),
// CHECK-NEXT: Some(token),
  %p = offset %arg3, %bx : tile<ptr<f32>>, tile<i32> -> tile<ptr<f32>>
  %zero = constant <f32: 0.000000e+00> : tile<f32>
  %one = constant <f32: 1.000000e+00> : tile<f32>
  %yes = constant <i1: true> : tile<i1>
  %old, %ot = atomic_cas_tko acq_rel device %p, %zero, %one, %yes token=%0 : tile<ptr<f32>>, tile<f32>, tile<i1> -> tile<f32>, token
