//! `softmax_kernel` from `softmax.py`, lifted from its Tile IR by
//! tileport's kernel writer (deterministic, no LLM). Each entry reproduces its
//! reference's Tile IR; port_report.json has the proof per configuration.

#[cutile::module]
pub mod softmax_port {
    use cutile::core::*;

    /// `x` with the launch fact "divisible by D" stated when the launch has one
    /// (D > 1), as cuTile Python states it; compiles to one `assume` or to nothing.
    fn divisible<T, const D: i32>(x: T) -> T {
        if D > 1 {
            unsafe { assume_div_by::<_, D>(x) }
        } else {
            x
        }
    }

    /// The tile block's id, as plain tiles: cutile-rs's `get_tile_block_id()` adds
    /// `assume bounded<0, ?>` to each component, which cuTile Python does not.
    #[cuda_tile::op(name = "cuda_tile.get_tile_block_id", since = "V13_2", params = [])]
    fn tile_block_id<E: ElementType>() -> (Tile<E, { [] }>, Tile<E, { [] }>, Tile<E, { [] }>) {
        unreachable!()
    }

    /// Variant `row` of `softmax_kernel`; dispatch: `True`.
    #[cutile::entry()]
    #[allow(clippy::too_many_arguments, unused_variables)]
    unsafe fn softmax_kernel<
        E: ElementType,
        const TILE_N: i32,
        const X_SHAPE_0_DIV: i32,
        const X_SHAPE_1_DIV: i32,
        const X_STRIDE_0_DIV: i32,
        const Y_SHAPE_0_DIV: i32,
        const Y_SHAPE_1_DIV: i32,
        const Y_STRIDE_0_DIV: i32,
    >(
        x: *mut E,
        x_shape_0: i32,
        x_shape_1: i32,
        x_stride_0: i32,
        x_stride_1: i32,
        y: *mut E,
        y_shape_0: i32,
        y_shape_1: i32,
        y_stride_0: i32,
        y_stride_1: i32,
    ) {
        let x: PointerTile<*mut E, { [] }> = pointer_to_tile(x);
        let y: PointerTile<*mut E, { [] }> = pointer_to_tile(y);
        let token: Token = new_token_unordered();
        let x: PointerTile<*mut E, { [] }> = assume_div_by::<_, 16>(x);
        let x_shape_0: i32 = divisible::<_, X_SHAPE_0_DIV>(x_shape_0);
        let x_shape_1: i32 = divisible::<_, X_SHAPE_1_DIV>(x_shape_1);
        let x_stride_0: i32 = divisible::<_, X_STRIDE_0_DIV>(x_stride_0);
        let y: PointerTile<*mut E, { [] }> = assume_div_by::<_, 16>(y);
        let y_shape_0: i32 = divisible::<_, Y_SHAPE_0_DIV>(y_shape_0);
        let y_shape_1: i32 = divisible::<_, Y_SHAPE_1_DIV>(y_shape_1);
        let y_stride_0: i32 = divisible::<_, Y_STRIDE_0_DIV>(y_stride_0);
        let x_shape_0: i32 = assume_bounds_lower::<_, 0>(x_shape_0);
        let x_shape_0: i32 = divisible::<_, X_SHAPE_0_DIV>(x_shape_0);
        let x_shape_1: i32 = assume_bounds_lower::<_, 0>(x_shape_1);
        let x_shape_1: i32 = divisible::<_, X_SHAPE_1_DIV>(x_shape_1);
        let x_stride_0: i32 = assume_bounds_lower::<_, 0>(x_stride_0);
        let x_stride_0: i32 = divisible::<_, X_STRIDE_0_DIV>(x_stride_0);
        let x_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> {
            dims: &[x_shape_0, x_shape_1],
        };
        let x_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> {
            dims: &[x_stride_0, 1i32],
        };
        let x_view: Tensor<E, { [-1, -1] }> = make_tensor_view(x, x_shape, x_strides, token);
        let y_shape_0: i32 = assume_bounds_lower::<_, 0>(y_shape_0);
        let y_shape_0: i32 = divisible::<_, Y_SHAPE_0_DIV>(y_shape_0);
        let y_shape_1: i32 = assume_bounds_lower::<_, 0>(y_shape_1);
        let y_shape_1: i32 = divisible::<_, Y_SHAPE_1_DIV>(y_shape_1);
        let y_stride_0: i32 = assume_bounds_lower::<_, 0>(y_stride_0);
        let y_stride_0: i32 = divisible::<_, Y_STRIDE_0_DIV>(y_stride_0);
        let y_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> {
            dims: &[y_shape_0, y_shape_1],
        };
        let y_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> {
            dims: &[y_stride_0, 1i32],
        };
        let y_view: Tensor<E, { [-1, -1] }> = make_tensor_view(y, y_shape, y_strides, token);
        // row = ct.bid(0)
        let pid: (Tile<i32, { [] }>, Tile<i32, { [] }>, Tile<i32, { [] }>) = tile_block_id::<i32>();
        let row: i32 = tile_to_scalar(pid.0);
        // tile = ct.load(x, index=(row, 0), shape=(1, TILE_N), padding_mode=ct.PaddingMode.NEG_INF)
        let cst: Tile<i32, { [] }> = constant(0i32, shape![]);
        let x_tiles: Partition<E, { [1, TILE_N] }> = make_partition_view(
            &x_view,
            shape![1, TILE_N],
            padding::NegInf,
            dim_map::Identity,
            token,
        );
        let (tile, _tile_token): (Tile<E, { [1, TILE_N] }>, Token) = load_view_raw(
            &x_tiles,
            [row, tile_to_scalar::<i32, i32>(cst)],
            Some(token),
            ordering::Weak,
            scope::TileBlock,
            tma::Enabled,
            None,
            [false, false],
            shape![1, TILE_N],
        );
        // tile = ct.astype(tile, ct.float32)
        let tile: Tile<f32, { [1, TILE_N] }> = convert_tile(tile);
        // row_max = ct.max(tile, axis=1, keepdims=True)
        let reduced: Tile<f32, { [1] }> = reduce_max(tile, 1i32);
        let row_max: Tile<f32, { [1, 1] }> = reduced.reshape(shape![1, 1]);
        // numerator = ct.exp(tile - row_max)
        let bcast: Tile<f32, { [1, TILE_N] }> = row_max.broadcast(shape![1, TILE_N]);
        let sub: Tile<f32, { [1, TILE_N] }> = tile - bcast;
        let numerator: Tile<f32, { [1, TILE_N] }> = exp(sub);
        // denominator = ct.sum(numerator, axis=1, keepdims=True)
        let reduced_1: Tile<f32, { [1] }> = reduce_sum(numerator, 1i32);
        let denominator: Tile<f32, { [1, 1] }> = reduced_1.reshape(shape![1, 1]);
        // result = numerator / denominator
        let bcast_1: Tile<f32, { [1, TILE_N] }> = denominator.broadcast(shape![1, TILE_N]);
        let result: Tile<f32, { [1, TILE_N] }> = numerator / bcast_1;
        // ct.store(y, index=(row, 0), tile=ct.astype(result, y.dtype))
        let cst_1: Tile<i32, { [] }> = constant(0i32, shape![]);
        let converted: Tile<E, { [1, TILE_N] }> = convert_tile(result);
        let y_tiles: Partition<E, { [1, TILE_N] }> = make_partition_view(
            &y_view,
            shape![1, TILE_N],
            padding::None,
            dim_map::Identity,
            token,
        );
        let _stored: Token = store_view_raw(
            &y_tiles,
            converted,
            [row, tile_to_scalar::<i32, i32>(cst_1)],
            Some(token),
            ordering::Weak,
            scope::TileBlock,
            tma::Enabled,
            None,
            [false, false],
        );
    }
}
