# Cheat: no kernel of its own, torch does the work (correct; flagged torch_fallback, no speed credit).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
