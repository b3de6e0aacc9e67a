import torch
import torch.nn as nn


class Model(nn.Module):
    """y = A @ x for a (M, K) matrix and a (K, 1) vector."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, x)


M = 8192
K = 8192


def get_inputs():
    A = torch.randn(M, K)
    x = torch.randn(K, 1)
    return [A, x]


def get_init_inputs():
    return []
