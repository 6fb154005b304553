"""matmul_conv's forms equal torch's convolutions (values and gradients)."""
import copy
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import matmul_conv  # noqa: E402


def check(conv, x, tol=1e-4):
    fast = copy.deepcopy(conv)
    assert matmul_conv.install(fast) == 1
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    y1, y2 = conv(x1), fast(x2)
    assert y1.shape == y2.shape, (y1.shape, y2.shape)
    g = torch.randn_like(y1)
    (y1 * g).sum().backward()
    (y2 * g).sum().backward()
    pairs = [(y1, y2), (x1.grad, x2.grad), (conv.weight.grad, fast.weight.grad),
             (conv.bias.grad, fast.bias.grad)]
    for a, b in pairs:
        err = (a - b).abs().max().item() / max(a.abs().max().item(), 1e-6)
        assert err < tol, f"{type(conv).__name__}: relative error {err}"
    assert list(conv.state_dict()) == list(fast.state_dict())


def main():
    torch.manual_seed(0)
    check(nn.Conv2d(1, 16, 3, 2), torch.randn(3, 1, 37, 80))
    check(nn.Conv2d(16, 16, 3, 2), torch.randn(3, 16, 18, 39))
    check(nn.Conv1d(32, 64, 1), torch.randn(4, 32, 29))
    check(nn.Conv1d(32, 32, 15, groups=32), torch.randn(4, 32, 43))
    print("matmul_conv: 4 of 4 forms equal torch's convolutions (values and gradients)")


if __name__ == "__main__":
    main()
