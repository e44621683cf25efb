"""Swin's shifted windows inside XNNPACK, end to end on ExecuTorch's runtime.

Both partitioners used to leave a Swin's shifted windows outside: ``torch.roll`` (an
``index_select`` over an ``fmod``), the patch merging's step-2 slices, an ``as_strided`` after its
pooling, and (in the transformers release optimum-executorch pins) the attention mask built by
slice assignment (``slice_scatter``/``copy`` of constants). xir folds the mask and the roll's index
(fold-constants), and rewrites the rest (xnnpack.index-select-as-slices, xnnpack.step-slice-as-view,
xnnpack.as-strided-as-view): the tiny Swin is one delegate with nothing outside, static or with a
symbolic batch, and matches eager at several batch sizes."""

from __future__ import annotations

import functools

import pytest
import torch

from xir_tools.harness import load_method, lower, reference, run_method

OPS_OF_THE_WINDOWS = (
    "aten.index_select",
    "aten.fmod.Scalar",
    "aten.as_strided_copy",
    "aten.slice_scatter",
    "aten.copy",
)


def tiny_swin():
    from transformers import SwinConfig, SwinForImageClassification

    torch.manual_seed(0)
    config = SwinConfig(
        image_size=32,
        patch_size=4,
        num_channels=3,
        embed_dim=8,
        depths=[2, 1],
        num_heads=[1, 1],
        window_size=4,
        num_labels=10,
    )
    return SwinForImageClassification(config).eval()


class Classifier(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixels):
        return self.model(pixel_values=pixels).logits


@functools.lru_cache(maxsize=None)
def lowered(which: str, dynamic_batch: bool):
    model = Classifier(tiny_swin())
    inputs = (torch.randn(2, 3, 32, 32),)
    shapes = {"pixels": {0: torch.export.Dim("batch", min=1, max=8)}} if dynamic_batch else None
    ep = torch.export.export(model, inputs, dynamic_shapes=shapes)
    return model, inputs, lower(ep, inputs, which)


def test_static_swin_is_one_delegate_with_nothing_outside():
    model, inputs, ours = lowered("xir", False)
    assert ours.outputs is not None, ours.error
    assert (ours.outputs[0] - reference(None, inputs, model)[0]).abs().max().item() < 1e-5
    assert ours.delegates == 1, ours.partitioner.report()
    assert not ours.outside, dict(ours.outside)
    assert ours.delegated["aten.cat"] >= 4  # the rolls' halves (and the patch merging's quarters)


def test_swin_with_a_symbolic_batch_keeps_its_windows_inside_and_runs_at_every_batch():
    model, _, ours = lowered("xir", True)
    assert ours.buffer is not None, ours.error
    assert not any(op in ours.outside for op in OPS_OF_THE_WINDOWS), dict(ours.outside)
    assert not any("slice_copy" in op for op in ours.outside), dict(ours.outside)  # the stepped slices
    assert "aten.linear" not in ours.outside
    _, method = load_method(ours.buffer)
    for batch in (1, 3, 8):
        x = torch.randn(batch, 3, 32, 32)
        (y,) = run_method(method, [x])
        assert (y - reference(None, (x,), model)[0]).abs().max().item() < 1e-5, batch


class MaskedShiftedWindows(torch.nn.Module):
    """A shifted-window block as transformers' Swin wrote it before it built its mask with
    arithmetic: the mask filled by slice assignment of constants (slice_scatter and copy), the
    cyclic shift by torch.roll, each window's attention masked, the patch merging's step-2 slices."""

    def __init__(self, size=8, window=4, shift=2, channels=8):
        super().__init__()
        self.size, self.window, self.shift = size, window, shift
        self.qkv = torch.nn.Linear(channels, 3 * channels)
        self.merge = torch.nn.Linear(4 * channels, channels)

    def mask(self):
        mask = torch.zeros(1, self.size, self.size, 1)
        slices = (slice(0, -self.window), slice(-self.window, -self.shift), slice(-self.shift, None))
        count = 0
        for h in slices:
            for w in slices:
                mask[:, h, w, :] = count
                count += 1
        n = self.size // self.window
        windows = mask.view(1, n, self.window, n, self.window, 1).permute(0, 1, 3, 2, 4, 5).reshape(-1, self.window**2)
        difference = windows.unsqueeze(1) - windows.unsqueeze(2)
        return difference.masked_fill(difference != 0, -100.0).masked_fill(difference == 0, 0.0)

    def forward(self, x):  # x: [B, size, size, C]
        b, _, _, c = x.shape
        shifted = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        n = self.size // self.window
        windows = shifted.view(b, n, self.window, n, self.window, c).permute(0, 1, 3, 2, 4, 5)
        windows = windows.reshape(b * n * n, self.window**2, c)
        q, k, v = self.qkv(windows).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) + self.mask().repeat(b, 1, 1)
        attended = (scores.softmax(-1) @ v).view(b, n, n, self.window, self.window, c)
        attended = attended.permute(0, 1, 3, 2, 4, 5).reshape(b, self.size, self.size, c)
        back = torch.roll(attended, shifts=(self.shift, self.shift), dims=(1, 2)) + x
        quarters = [back[:, i::2, j::2, :] for i in (0, 1) for j in (0, 1)]
        return self.merge(torch.cat(quarters, -1))


@pytest.fixture(scope="module")
def masked_windows():
    torch.manual_seed(0)
    model = MaskedShiftedWindows().eval()
    inputs = (torch.randn(2, 8, 8, 8),)
    ep = torch.export.export(model, inputs)
    return model, inputs, lower(ep, inputs, "xir"), lower(ep, inputs, "stock")


def test_a_mask_built_by_slice_assignment_folds_and_the_block_is_one_delegate(masked_windows):
    model, inputs, ours, stock = masked_windows
    assert ours.outputs is not None, ours.error
    assert (ours.outputs[0] - reference(None, inputs, model)[0]).abs().max().item() < 1e-5
    assert ours.delegates == 1, ours.partitioner.report()
    assert not ours.outside, dict(ours.outside)
    assert stock.outputs is not None and (stock.outputs[0] - ours.outputs[0]).abs().max().item() < 1e-5
    assert any(op in stock.outside for op in OPS_OF_THE_WINDOWS), dict(stock.outside)
