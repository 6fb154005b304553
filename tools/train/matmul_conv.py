"""Convolutions as unfold + matmul, for training on the GPU.

Every batch has a new (batch, frames) shape. cuDNN builds an execution plan
per new convolution shape (forward, data and weight gradients), which cost
about 0.36 s per step on the H200 - more than the step's arithmetic. These
subclasses compute the same functions with unfold / slicing and matmuls,
which need no per-shape plan. Parameters and state-dict names are unchanged:
`install(model)` only swaps the class of each nn.Conv1d / nn.Conv2d.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MatmulConv2d(nn.Conv2d):
    def forward(self, x):
        assert self.groups == 1 and self.dilation == (1, 1) and self.padding == (0, 0)
        b, _, h, w = x.shape
        kh, kw = self.kernel_size
        sh, sw = self.stride
        out_h, out_w = (h - kh) // sh + 1, (w - kw) // sw + 1
        if self.in_channels == 1:
            # (B, 1, H, W) -> (B, H', W', kh*kw) strided windows, no im2col copy.
            patches = x[:, 0].unfold(1, kh, sh).unfold(2, kw, sw).reshape(b, out_h, out_w, kh * kw)
        else:
            cols = F.unfold(x, (kh, kw), stride=(sh, sw))  # (B, C*kh*kw, H'*W')
            patches = cols.transpose(1, 2).reshape(b, out_h, out_w, -1)
        y = F.linear(patches, self.weight.reshape(self.out_channels, -1), self.bias)
        return y.permute(0, 3, 1, 2)


class MatmulConv1d(nn.Conv1d):
    def forward(self, x):
        assert self.stride == (1,) and self.dilation == (1,) and self.padding == (0,)
        k = self.kernel_size[0]
        if k == 1 and self.groups == 1:  # pointwise: a Linear over channels
            y = F.linear(x.transpose(1, 2), self.weight[:, :, 0], self.bias)
            return y.transpose(1, 2)
        assert self.groups == self.in_channels == self.out_channels, "depthwise only"
        t = x.shape[-1] - k + 1
        w = self.weight[:, 0, :]  # (C, K)
        y = x[:, :, 0:t] * w[:, 0:1]
        for j in range(1, k):
            y = y + x[:, :, j:j + t] * w[:, j:j + 1]
        if self.bias is not None:
            y = y + self.bias[:, None]
        return y


def install(model: nn.Module) -> int:
    """Swaps every Conv1d / Conv2d of `model` to the matmul forms; returns how many."""
    count = 0
    for module in model.modules():
        if type(module) is nn.Conv2d:
            module.__class__ = MatmulConv2d
            count += 1
        elif type(module) is nn.Conv1d:
            module.__class__ = MatmulConv1d
            count += 1
    return count
