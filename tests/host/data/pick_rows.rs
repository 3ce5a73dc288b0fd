//! A cutile-rs port of `pick_rows_kernel` written in the kernel writer's style, for
//! the host builder's tests: the list `tables` reaches the entry as the device
//! address of its int64 table, one row (address, extents, strides) per array, and
//! its length; the kernel states its element facts on the values it reads there.

#[cutile::module]
pub mod pick_rows_port {
    use cutile::core::*;

    /// `x` with the launch fact "divisible by D" stated when the launch has one.
    fn divisible<T, const D: i32>(x: T) -> T {
        if D > 1 {
            unsafe { assume_div_by::<_, D>(x) }
        } else {
            x
        }
    }

    /// The tile block's id, as plain tiles.
    #[cuda_tile::op(name = "cuda_tile.get_tile_block_id", since = "V13_2", params = [])]
    fn tile_block_id<E: ElementType>() -> (Tile<E, { [] }>, Tile<E, { [] }>, Tile<E, { [] }>) {
        unreachable!()
    }

    /// `trunci` without overflow flags.
    #[cuda_tile::op(name = "cuda_tile.trunci", since = "V13_2", params = ["from"], named_attributes = ["overflow=none"])]
    fn trunci_plain_r0<EIn: ElementType, EOut: ElementType, const S: [i32; 0]>(
        _from: Tile<EIn, S>,
    ) -> Tile<EOut, S> {
        unreachable!()
    }

    #[cutile::entry()]
    #[allow(clippy::too_many_arguments, unused_variables)]
    unsafe fn pick_rows_kernel<E: ElementType, const TILE_N: i32, const OUT_SHAPE_1_DIV: i32, const OUT_STRIDE_0_DIV: i32, const TABLES_SHAPE_0_DIV: i32, const TABLES_SHAPE_1_DIV: i32, const TABLES_STRIDE_0_DIV: i32>(
        tables: *mut i64,
        tables_len: i32,
        out: *mut E,
        out_shape_0: i32,
        out_shape_1: i32,
        out_stride_0: i32,
        out_stride_1: i32,
    ) {
        let tables: PointerTile<*mut i64, { [] }> = pointer_to_tile(tables);
        let out: PointerTile<*mut E, { [] }> = pointer_to_tile(out);
        let token: Token = new_token_unordered();
        let out: PointerTile<*mut E, { [] }> = assume_div_by::<_, 16>(out);
        let out_shape_1: i32 = divisible::<_, OUT_SHAPE_1_DIV>(out_shape_1);
        let out_stride_0: i32 = divisible::<_, OUT_STRIDE_0_DIV>(out_stride_0);
        let tables_shape: Shape<{ [-1, 5] }> = Shape::<{ [-1, 5] }> {
            dims: &[tables_len, 5i32],
        };
        let tables_strides: Array<{ [5, 1] }> = Array::<{ [5, 1] }> {
            dims: &[5i32, 1i32],
        };
        let tables_view: Tensor<i64, { [-1, 5] }> =
            make_tensor_view(tables, tables_shape, tables_strides, token);
        let tables_tiles: Partition<i64, { [1, 8] }> = make_partition_view(
            &tables_view,
            shape![1, 8],
            padding::None,
            dim_map::Identity,
            token,
        );
        let pid: (Tile<i32, { [] }>, Tile<i32, { [] }>, Tile<i32, { [] }>) = tile_block_id::<i32>();
        let i: i32 = tile_to_scalar(pid.0);
        let j: i32 = tile_to_scalar(pid.1);
        let cst: Tile<i32, { [] }> = constant(0i32, shape![]);
        let (row, _row_token): (Tile<i64, { [1, 8] }>, Token) = load_view_raw(
            &tables_tiles,
            [i, tile_to_scalar::<i32, i32>(cst)],
            None,
            ordering::Weak,
            scope::TileBlock,
            tma::Enabled,
            None,
            [false, false],
            shape![1, 8],
        );
        let cst_1: Tile<i32, { [] }> = constant(1i32, shape![]);
        let cst_2: Tile<i32, { [] }> = constant(2i32, shape![]);
        let cst_3: Tile<i32, { [] }> = constant(3i32, shape![]);
        let part: Tile<i64, { [1, 1] }> = extract(row, [cst, cst]);
        let address: Tile<i64, { [] }> = part.reshape(shape![]);
        let part_1: Tile<i64, { [1, 1] }> = extract(row, [cst, cst_1]);
        let reshaped_1: Tile<i64, { [] }> = part_1.reshape(shape![]);
        let part_2: Tile<i64, { [1, 1] }> = extract(row, [cst, cst_2]);
        let reshaped_2: Tile<i64, { [] }> = part_2.reshape(shape![]);
        let part_3: Tile<i64, { [1, 1] }> = extract(row, [cst, cst_3]);
        let reshaped_3: Tile<i64, { [] }> = part_3.reshape(shape![]);
        let narrow: Tile<i32, { [] }> = trunci_plain_r0(reshaped_1);
        let narrow_1: Tile<i32, { [] }> = trunci_plain_r0(reshaped_2);
        let narrow_2: Tile<i32, { [] }> = trunci_plain_r0(reshaped_3);
        let ptr: PointerTile<*mut E, { [] }> = int_to_ptr(address);
        let ptr: PointerTile<*mut E, { [] }> = assume_div_by::<_, 16>(ptr);
        let narrow: Tile<i32, { [] }> = assume_bounds_lower::<_, 0>(narrow);
        let narrow: Tile<i32, { [] }> = divisible::<_, TABLES_SHAPE_0_DIV>(narrow);
        let narrow_1: Tile<i32, { [] }> = assume_bounds_lower::<_, 0>(narrow_1);
        let narrow_1: Tile<i32, { [] }> = divisible::<_, TABLES_SHAPE_1_DIV>(narrow_1);
        let narrow_2: Tile<i32, { [] }> = assume_bounds_lower::<_, 0>(narrow_2);
        let narrow_2: Tile<i32, { [] }> = divisible::<_, TABLES_STRIDE_0_DIV>(narrow_2);
        let ptr_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> {
            dims: &[tile_to_scalar::<i32, i32>(narrow), tile_to_scalar::<i32, i32>(narrow_1)],
        };
        let ptr_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> {
            dims: &[tile_to_scalar::<i32, i32>(narrow_2), 1i32],
        };
        let ptr_view: Tensor<E, { [-1, -1] }> = make_tensor_view(ptr, ptr_shape, ptr_strides, token);
        let ptr_tiles: Partition<E, { [1, TILE_N] }> = make_partition_view(
            &ptr_view,
            shape![1, TILE_N],
            padding::Zero,
            dim_map::Identity,
            token,
        );
        let (tile, _tile_token): (Tile<E, { [1, TILE_N] }>, Token) = load_view_raw(
            &ptr_tiles,
            [tile_to_scalar::<i32, i32>(cst), j],
            Some(token),
            ordering::Weak,
            scope::TileBlock,
            tma::Enabled,
            None,
            [false, false],
            shape![1, TILE_N],
        );
        let out_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> {
            dims: &[out_shape_0, out_shape_1],
        };
        let out_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> {
            dims: &[out_stride_0, 1i32],
        };
        let out_view: Tensor<E, { [-1, -1] }> = make_tensor_view(out, out_shape, out_strides, token);
        let out_tiles: Partition<E, { [1, TILE_N] }> = make_partition_view(
            &out_view,
            shape![1, TILE_N],
            padding::None,
            dim_map::Identity,
            token,
        );
        let _stored: Token = store_view_raw(
            &out_tiles,
            tile,
            [i, j],
            Some(token),
            ordering::Weak,
            scope::TileBlock,
            tma::Enabled,
            None,
            [false, false],
        );
    }
}
