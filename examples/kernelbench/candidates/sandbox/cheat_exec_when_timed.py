# Cheat (sandbox): honest while it is verified, then from the first timed
# call on starts a program (here nvidia-smi, as one would to change clocks
# or read the other processes on the GPU); the relu itself is right. Programs
# may run only until every case ran once (compilers do); from then on exec is
# refused: verdict denied.
import subprocess

import torch
import torch.nn as nn

CALLS = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 6:  # past the verification calls (3 cases x 2 seeds)
            subprocess.run(["nvidia-smi", "-L"], capture_output=True)
        return torch.relu(x)
