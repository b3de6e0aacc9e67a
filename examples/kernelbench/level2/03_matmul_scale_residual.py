import torch
import torch.nn as nn


class Model(nn.Module):
    """y = linear(x); y * scaling_factor + y (a scaled residual)."""

    def __init__(self, in_features: int, out_features: int, scaling_factor: float):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.matmul(x)
        return y * self.scaling_factor + y.detach()


batch_size = 512
in_features = 1024
out_features = 1024
scaling_factor = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scaling_factor]
