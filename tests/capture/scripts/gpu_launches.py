"""Real cuTile launches on a GPU: an index gather twice (one record), then with
other hints and through a CUDA graph capture (no value range read there)."""

from __future__ import annotations

import cuda.tile as ct
import torch

TILE = 64


@ct.kernel(occupancy=2)
def gather_kernel(out, table, index, TILE: ct.Constant[int]):
    block = ct.bid(0)
    rows = ct.load(index, index=(block,), shape=(TILE,))
    ct.store(out, index=(block,), tile=ct.gather(table, rows))


def main() -> None:
    stream = torch.cuda.current_stream()
    table = torch.arange(1000, dtype=torch.float32, device="cuda")
    index = torch.randint(7, 900, (4 * TILE,), dtype=torch.int32, device="cuda")
    index[0], index[1] = 7, 899
    out = torch.empty(4 * TILE, dtype=torch.float32, device="cuda")
    for _ in range(2):
        ct.launch(stream, (4,), gather_kernel, (out, table, index, TILE))
    assert torch.equal(out, table[index.long()])
    wide = gather_kernel.replace_hints(occupancy=4, num_ctas=1)
    ct.launch(stream, (4,), wide, (out, table, index, TILE))
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side), torch.cuda.graph(graph):
        ct.launch(torch.cuda.current_stream(), (2,), gather_kernel, (out, table, index, TILE))
    graph.replay()
    torch.cuda.synchronize()
    print("GPU LAUNCHES OK")


main()
