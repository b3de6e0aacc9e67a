# Honest: a Triton relu replayed through a CUDA graph. The graph is captured
# once per input shape on static buffers; each call copies its input in,
# replays the graph and returns a copy of the static output (a timed batch
# keeps every call's output, so the static one cannot be returned itself).
# Its own kernel does all the computing: the copies and the replay's
# bookkeeping fills move or set bytes (docs/kernelbench.md, attribution).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_graph_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graphs = {}

    def _graph(self, x):
        key = (tuple(x.shape), x.dtype, x.device)
        if key not in self.graphs:
            static_in = torch.empty_like(x)
            static_out = torch.empty_like(x)
            n = x.numel()

            def launch():
                relu_graph_kernel[(triton.cdiv(n, 1024),)](static_in, static_out, n, BLOCK=1024)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                launch()  # compiled and warmed outside the capture
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                launch()
            self.graphs[key] = (graph, static_in, static_out)
        return self.graphs[key]

    def forward(self, x):
        graph, static_in, static_out = self._graph(x.contiguous())
        static_in.copy_(x)
        graph.replay()
        return static_out.clone()
