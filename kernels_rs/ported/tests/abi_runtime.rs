//! The launcher runtime without a GPU: port-spec arithmetic keeps Python's
//! semantics (the expected values are what Python computes), overflow and
//! division by zero are BAD_SHAPE statuses, descriptors are refused with their
//! own status before any CUDA call, and a panic never crosses the boundary.

use std::ptr;

use tileport_kernels::ffi::abi::{Dtype, Plan, Status, Tensor, MAX_GENERICS, MAX_RANK};
use tileport_kernels::ffi::runtime as rt;

#[test]
fn integer_division_and_modulo_follow_python() {
    // Python: 7 // 2, -7 // 2, 7 // -2, -7 // -2 and the same with %.
    let cases = [
        (7, 2, 3, 1),
        (-7, 2, -4, 1),
        (7, -2, -4, -1),
        (-7, -2, 3, -1),
        (6, 3, 2, 0),
    ];
    for (a, b, quotient, remainder) in cases {
        assert_eq!(rt::floordiv(a, b).unwrap(), quotient, "{a} // {b}");
        assert_eq!(rt::modulo(a, b).unwrap(), remainder, "{a} % {b}");
    }
}

#[test]
fn cdiv_and_next_pow2_match_the_spec_language() {
    assert_eq!(rt::cdiv(1000, 128).unwrap(), 8);
    assert_eq!(rt::cdiv(1024, 128).unwrap(), 8);
    assert_eq!(rt::cdiv(0, 128).unwrap(), 0);
    assert_eq!(rt::cdiv(-5, 2).unwrap(), -2);
    for (n, expected) in [(0, 1), (1, 1), (2, 2), (3, 4), (781, 1024), (1024, 1024)] {
        assert_eq!(rt::next_pow2(n).unwrap(), expected, "next_pow2({n})");
    }
}

#[test]
fn overflow_and_division_by_zero_are_bad_shape() {
    // An expression's error refuses the launch as a bad shape.
    let status = |result: rt::ExprResult<i64>| rt::AbiError::from(result.unwrap_err()).status;
    assert_eq!(status(rt::floordiv(1, 0)), Status::BadShape);
    assert_eq!(status(rt::modulo(1, 0)), Status::BadShape);
    assert_eq!(status(rt::mul(i64::MAX, 2)), Status::BadShape);
    assert_eq!(status(rt::add(i64::MAX, 1)), Status::BadShape);
    assert_eq!(status(rt::next_pow2(i64::MAX)), Status::BadShape);
    assert_eq!(status(rt::shift_left(1, 63)), Status::BadShape);
    assert_eq!(status(rt::pow(2, -1)), Status::BadShape);
    assert_eq!(
        status(rt::to_i32(1 << 31, "TILE_N").map(i64::from)),
        Status::BadShape
    );
}

#[test]
fn facts_are_what_a_cutile_launch_states() {
    // toolchain/reference_export.py: 16 or nothing, strides counted in elements.
    for (extent, expected) in [(0, 16), (1, 1), (1000, 1), (781, 1), (4096, 16), (48, 16)] {
        assert_eq!(rt::shape_fact(extent), expected, "shape_fact({extent})");
    }
    for (stride, itemsize, expected) in [
        (1000, 4, 4),
        (781, 2, 1),
        (1, 4, 1),
        (2048, 2, 8),
        (8, 1, 1),
    ] {
        assert_eq!(
            rt::stride_fact(stride, itemsize),
            expected,
            "stride_fact({stride}, {itemsize})"
        );
    }
    assert_eq!(rt::address_fact(0x1_0000), 16);
    assert_eq!(rt::address_fact(0x1_0004), 1);
}

#[test]
fn grids_are_bounded_and_empty_grids_launch_nothing() {
    assert_eq!(rt::launch_grid([37, 1, 1]).unwrap(), Some((37, 1, 1)));
    assert_eq!(rt::launch_grid([0, 1, 1]).unwrap(), None);
    assert_eq!(
        rt::launch_grid([-1, 1, 1]).unwrap_err().status,
        Status::BadShape
    );
    assert_eq!(
        rt::launch_grid([1, 65_536, 1]).unwrap_err().status,
        Status::BadShape
    );
}

fn descriptor(dtype: Dtype, shape: &[i64], strides: &[i64]) -> Tensor {
    let mut tensor = Tensor {
        data: 0x1_0000,
        dtype: dtype as i32,
        ndim: shape.len() as i32,
        shape: [0; MAX_RANK],
        strides: [0; MAX_RANK],
    };
    tensor.shape[..shape.len()].copy_from_slice(shape);
    tensor.strides[..strides.len()].copy_from_slice(strides);
    tensor
}

#[test]
fn descriptors_are_checked_before_any_cuda_call() {
    let refused = |tensor: &Tensor, rank: usize| unsafe {
        rt::tensor_arg(tensor, "x", rank).unwrap_err().status
    };
    let good = descriptor(Dtype::Float32, &[4, 8], &[8, 1]);
    assert!(unsafe { rt::tensor_arg(&good, "x", 2) }.is_ok());
    assert_eq!(
        unsafe { rt::tensor_arg(ptr::null(), "x", 2) }
            .unwrap_err()
            .status,
        Status::NullDescriptor
    );
    let mut unknown = good;
    unknown.dtype = 99;
    assert_eq!(refused(&unknown, 2), Status::UnknownDtype);
    assert_eq!(refused(&good, 3), Status::BadRank);
    let negative = descriptor(Dtype::Float32, &[-1, 8], &[8, 1]);
    assert_eq!(refused(&negative, 2), Status::BadShape);
    let huge = descriptor(Dtype::Float32, &[1 << 31, 8], &[8, 1]);
    assert_eq!(refused(&huge, 2), Status::BadShape);
    let backwards = descriptor(Dtype::Float32, &[4, 8], &[-8, 1]);
    assert_eq!(refused(&backwards, 2), Status::BadStride);
}

#[test]
fn a_panic_becomes_a_status_code() {
    assert_eq!(
        tileport_kernels::ffi::runtime::tileport_selftest_panic(),
        Status::Panic as i32
    );
    let mut buffer = [0u8; 256];
    let length = unsafe { rt::tileport_last_error(buffer.as_mut_ptr().cast(), buffer.len()) };
    let message = std::str::from_utf8(&buffer[..length.min(255)]).unwrap();
    assert!(message.contains("deliberate panic"), "{message}");
}

#[test]
fn a_plan_reports_generics_and_refuses_a_null_plan() {
    let generics = [
        rt::Generic::Int(1024),
        rt::Generic::Element(Dtype::Bfloat16),
    ];
    let mut plan = Plan {
        variant: -1,
        num_generics: 0,
        grid: [0; 3],
        reserved: 0,
        generics: [0; MAX_GENERICS],
    };
    unsafe { rt::write_plan(&mut plan, 0, [37, 1, 1], &generics) }.unwrap();
    assert_eq!(plan.grid, [37, 1, 1]);
    assert_eq!(&plan.generics[..2], &[1024, Dtype::Bfloat16 as i64]);
    let refused = unsafe { rt::write_plan(ptr::null_mut(), 0, [1, 1, 1], &generics) };
    assert_eq!(refused.unwrap_err().status, Status::NullDescriptor);
}

const NAMES: [&str; 3] = ["weights", "weights_len", "weights_table"];

fn element(data: u64, shape: &[i64], strides: &[i64]) -> Tensor {
    Tensor {
        data,
        ..descriptor(Dtype::Float16, shape, strides)
    }
}

#[test]
fn a_list_table_holds_each_elements_address_extents_and_strides() {
    let elements = [
        element(0x10_0000, &[4, 8], &[8, 1]),
        element(0x20_0000, &[4, 8], &[12, 1]),
    ];
    let table = descriptor(Dtype::Int64, &[2, 5], &[5, 1]);
    let list = unsafe { rt::list_arg(elements.as_ptr(), 2, &table, NAMES, 2) }.unwrap();
    assert_eq!(list.len_i32(), 2);
    assert_eq!(list.dtype, Dtype::Float16);
    assert_eq!(
        list.table_rows(),
        vec![0x10_0000, 4, 8, 8, 1, 0x20_0000, 4, 8, 12, 1]
    );
    // The weakest over the elements: 16-byte rows (8 halves) and 24-byte rows (none).
    assert_eq!(list.stride_fact(0), 1);
    assert_eq!(list.shape_fact(0), 1);
    assert_eq!(list.address_fact(), 16);
    assert_eq!(list.first().index, Some(0));
}

#[test]
fn a_list_is_refused_with_its_own_status() {
    let elements = [
        element(0x10_0000, &[4, 8], &[8, 1]),
        element(0x20_0000, &[4, 8], &[8, 1]),
    ];
    let table = descriptor(Dtype::Int64, &[2, 5], &[5, 1]);
    let status = |elements: *const Tensor, len: i32, table: *const Tensor| unsafe {
        rt::list_arg(elements, len, table, NAMES, 2)
            .unwrap_err()
            .status
    };
    assert_eq!(status(ptr::null(), 2, &table), Status::NullDescriptor);
    assert_eq!(status(elements.as_ptr(), 0, &table), Status::BadShape);
    assert_eq!(
        status(elements.as_ptr(), 2, ptr::null()),
        Status::NullDescriptor
    );
    let mut mixed = elements;
    mixed[1].dtype = Dtype::Float32 as i32;
    assert_eq!(status(mixed.as_ptr(), 2, &table), Status::UnsupportedDtype);
    let narrow = descriptor(Dtype::Int32, &[2, 5], &[5, 1]);
    assert_eq!(
        status(elements.as_ptr(), 2, &narrow),
        Status::UnsupportedDtype
    );
    let short = descriptor(Dtype::Int64, &[1, 5], &[5, 1]);
    assert_eq!(status(elements.as_ptr(), 2, &short), Status::BadShape);
    let gapped = descriptor(Dtype::Int64, &[2, 5], &[6, 1]);
    assert_eq!(status(elements.as_ptr(), 2, &gapped), Status::BadStride);
}

#[test]
fn an_array_inside_a_verified_range_needs_no_driver_call() {
    let mut ranges = rt::AllocationRanges::default();
    assert_eq!(ranges.lookup(0x1000, 0x1100), None);
    ranges.insert(0x1000, 0x2000, 3);
    assert_eq!(ranges.lookup(0x1000, 0x2000), Some(3));
    assert_eq!(ranges.lookup(0x1800, 0x1900), Some(3));
    // Its bytes past the range's end, or below its start: the driver is asked.
    assert_eq!(ranges.lookup(0x1800, 0x2001), None);
    assert_eq!(ranges.lookup(0x0f00, 0x1100), None);
}

#[test]
fn a_reallocated_range_replaces_the_stale_ones_it_overlaps() {
    let mut ranges = rt::AllocationRanges::default();
    ranges.insert(0x1000, 0x2000, 0);
    ranges.insert(0x3000, 0x4000, 0);
    // 0x1000..0x2000 was freed and its addresses reused by a larger allocation.
    ranges.insert(0x1800, 0x3800, 1);
    assert_eq!(ranges.len(), 1);
    assert_eq!(ranges.lookup(0x1000, 0x1100), None);
    assert_eq!(ranges.lookup(0x3900, 0x3a00), None);
    assert_eq!(ranges.lookup(0x2000, 0x3000), Some(1));
}

#[test]
fn a_range_the_driver_no_longer_confirms_is_forgotten() {
    let mut ranges = rt::AllocationRanges::default();
    ranges.insert(0x1000, 0x2000, 0);
    ranges.insert(0x4000, 0x5000, 0);
    ranges.forget(0x1fff);
    assert_eq!(ranges.lookup(0x1000, 0x1100), None);
    assert_eq!(ranges.lookup(0x4000, 0x4100), Some(0));
    ranges.forget(0x5000); // one past the end: not inside
    assert_eq!(ranges.len(), 1);
}

#[test]
fn a_verified_range_is_confirmed_again_after_a_bounded_number_of_launches() {
    let mut ranges = rt::AllocationRanges::default();
    ranges.insert(0x1000, 0x2000, 0);
    for _ in 0..rt::REVERIFY_AFTER {
        assert_eq!(ranges.lookup(0x1000, 0x1100), Some(0));
    }
    assert_eq!(ranges.lookup(0x1000, 0x1100), None);
    ranges.insert(0x1000, 0x2000, 0); // the driver confirmed it again
    assert_eq!(ranges.lookup(0x1000, 0x1100), Some(0));
}

#[test]
fn an_array_spans_its_extents_and_strides() {
    let tensor = descriptor(Dtype::Float32, &[3, 5], &[8, 1]);
    let array = unsafe { rt::tensor_arg(&tensor, "x", 2).unwrap() };
    // Elements 0 ..= 2 * 8 + 4: 21 floats.
    assert_eq!(array.byte_end(), 0x1_0000 + 21 * 4);
}
