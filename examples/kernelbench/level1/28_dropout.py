import torch
import torch.nn as nn


class Model(nn.Module):
    """Dropout in training mode: random by design, so outputs cannot be checked.
    In the corpus as an import the importer must refuse, with its reason."""

    def __init__(self, p: float):
        super().__init__()
        self.dropout = nn.Dropout(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(x)


batch_size = 1024
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [0.5]
