import torch
import torch.nn as nn


class Model(nn.Module):
    """Pre-norm transformer MLP block: x + W2 gelu(W1 layernorm(x))."""

    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


batch_size = 8
seq_len = 512
hidden = 1024
ffn = 4096


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden, ffn]
