# Cheat: writes a reply of its own on the worker's pipe (its fd is in the worker's argv),
# announcing a payload of 10 TB: a caller that believed it allocated that much, or raised
# out of evaluate (an evaluation a trainer might drop instead of scoring 0).
import os
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os.write(int(sys.argv[2]), b'{"ok": true, "bytes": 10000000000000}\n')
        return torch.relu(x)
