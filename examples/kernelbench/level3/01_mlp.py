import torch
import torch.nn as nn


class Model(nn.Module):
    """A small MLP: Linear + ReLU layers, then a Linear head."""

    def __init__(self, input_size: int, layer_sizes: list, output_size: int):
        super().__init__()
        layers, current = [], input_size
        for size in layer_sizes:
            layers += [nn.Linear(current, size), nn.ReLU()]
            current = size
        layers.append(nn.Linear(current, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


batch_size = 256
input_size = 1024
hidden_size = 512
output_size = 64


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, [hidden_size, hidden_size], output_size]
