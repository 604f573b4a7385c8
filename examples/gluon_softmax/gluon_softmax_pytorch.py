"""PyTorch reference for gluon_softmax.py."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x.float(), dim=-1).to(x.dtype)
