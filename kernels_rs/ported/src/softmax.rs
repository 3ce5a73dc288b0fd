//! Row softmax, ported by hand from `examples/kernels/softmax.py`.
//!
//! The entry mirrors cuTile Python's calling convention (per array: base
//! pointer, shape, strides, all `i32`) and restates every fact the reference
//! launch assumes, so both front ends emit the same Tile IR. Rows are padded
//! with -inf so a ragged row length reduces correctly.

#[cutile::module]
pub mod softmax_port {
    use cutile::core::*;

    /// `x` with the launch fact "divisible by D" stated when the launch has one
    /// (D > 1), as cuTile Python states it: one `assume`, or nothing.
    fn divisible<T, const D: i32>(x: T) -> T {
        if D > 1 {
            unsafe { assume_div_by::<_, D>(x) }
        } else {
            x
        }
    }

    /// The tile block's id as plain tiles: cutile-rs's `get_tile_block_id()`
    /// adds `assume bounded<0, ?>` to each component, which cuTile Python does
    /// not, and which can change the machine code (docs/UPSTREAM_GAPS.md).
    #[cuda_tile::op(name = "cuda_tile.get_tile_block_id", since = "V13_2", params = [])]
    fn tile_block_id<E: ElementType>() -> (Tile<E, { [] }>, Tile<E, { [] }>, Tile<E, { [] }>) {
        unreachable!()
    }

    #[cutile::entry()]
    #[allow(clippy::too_many_arguments)]
    unsafe fn softmax_kernel<const TILE_N: i32, const COLS_DIV: i32>(
        x: *mut f32,
        x_rows: i32,
        x_cols: i32,
        x_row_stride: i32,
        _x_col_stride: i32,
        y: *mut f32,
        y_rows: i32,
        y_cols: i32,
        y_row_stride: i32,
        _y_col_stride: i32,
    ) {
        let token: Token = new_token_unordered();
        // Facts of the launch: 16-byte aligned bases, row lengths divisible by
        // COLS_DIV, row strides divisible by 16 bytes (4 f32 elements).
        let x_base: PointerTile<*mut f32, { [] }> = assume_div_by::<_, 16>(pointer_to_tile(x));
        let x_cols: i32 = divisible::<_, COLS_DIV>(x_cols);
        let x_row_stride: i32 = assume_div_by::<_, 4>(x_row_stride);
        let y_base: PointerTile<*mut f32, { [] }> = assume_div_by::<_, 16>(pointer_to_tile(y));
        let y_cols: i32 = divisible::<_, COLS_DIV>(y_cols);
        let y_row_stride: i32 = assume_div_by::<_, 4>(y_row_stride);
        // Views as cuTile Python builds them: non-negative shapes and strides, unit column stride.
        let x_rows: i32 = assume_bounds_lower::<_, 0>(x_rows);
        let x_cols: i32 = divisible::<_, COLS_DIV>(assume_bounds_lower::<_, 0>(x_cols));
        let x_row_stride: i32 = assume_div_by::<_, 4>(assume_bounds_lower::<_, 0>(x_row_stride));
        let x_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> {
            dims: &[x_rows, x_cols],
        };
        let x_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> {
            dims: &[x_row_stride, 1i32],
        };
        let x_view: Tensor<f32, { [-1, -1] }> = make_tensor_view(x_base, x_shape, x_strides, token);
        let y_rows: i32 = assume_bounds_lower::<_, 0>(y_rows);
        let y_cols: i32 = divisible::<_, COLS_DIV>(assume_bounds_lower::<_, 0>(y_cols));
        let y_row_stride: i32 = assume_div_by::<_, 4>(assume_bounds_lower::<_, 0>(y_row_stride));
        let y_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> {
            dims: &[y_rows, y_cols],
        };
        let y_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> {
            dims: &[y_row_stride, 1i32],
        };
        let y_view: Tensor<f32, { [-1, -1] }> = make_tensor_view(y_base, y_shape, y_strides, token);
        let pid: (Tile<i32, { [] }>, Tile<i32, { [] }>, Tile<i32, { [] }>) = tile_block_id::<i32>();
        let row_index: i32 = tile_to_scalar(pid.0);
        let load_col: i32 = 0i32;
        let x_rows_view = make_partition_view(
            &x_view,
            shape![1, TILE_N],
            padding::NegInf,
            dim_map::Identity,
            token,
        );
        let row: Tile<f32, { [1, TILE_N] }> = load_view_tko(
            &x_rows_view,
            [row_index, load_col],
            ordering::Weak,
            scope::TileBlock,
            None,
            tma::Enabled,
        );
        let row_max: Tile<f32, { [1] }> = reduce_max(row, 1i32);
        let row_max: Tile<f32, { [1, TILE_N] }> =
            row_max.reshape(shape![1, 1]).broadcast(shape![1, TILE_N]);
        let numerator: Tile<f32, { [1, TILE_N] }> = exp(row - row_max);
        let denominator: Tile<f32, { [1] }> = reduce_sum(numerator, 1i32);
        let denominator: Tile<f32, { [1, TILE_N] }> = denominator
            .reshape(shape![1, 1])
            .broadcast(shape![1, TILE_N]);
        let softmax: Tile<f32, { [1, TILE_N] }> = numerator / denominator;
        let store_col: i32 = 0i32;
        let mut y_rows_view =
            make_partition_view_mut(&y_view, shape![1, TILE_N], padding::None, token);
        store_view_tko_mut(
            &mut y_rows_view,
            softmax,
            [row_index, store_col],
            ordering::Weak,
            scope::TileBlock,
            None,
            tma::Enabled,
        );
    }
}
