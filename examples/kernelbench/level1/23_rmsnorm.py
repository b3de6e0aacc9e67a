import torch
import torch.nn as nn


class Model(nn.Module):
    """RMS normalisation over the channel dimension of (B, C, L)."""

    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)
        return x / rms


batch_size = 16
features = 64
length = 4096


def get_inputs():
    x = torch.randn(batch_size, features, length)
    return [x]


def get_init_inputs():
    return [features]
