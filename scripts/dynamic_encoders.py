"""Fill-mask encoders of a dynamic length, as optimum-executorch 1.1.0 exports them (input_ids and
attention_mask, ``Dim.AUTO`` on dim 1, strict export; the example is 62 tokens, the longest
RoBERTa's positions take): tiny two-layer BERT, RoBERTa, DistilBERT and ALBERT with random weights, each lowered with
stock's XnnpackPartitioner and with xir's, serialized, loaded once on ExecuTorch's runtime, run at
several lengths (padded at the end) and compared with eager. Prints the delegates, the ops left
outside and the largest difference from eager at each length (``--static``: exported at one length).

    .venv/bin/python scripts/dynamic_encoders.py [--models bert albert] [--which xir] [--static]
"""

from __future__ import annotations

import argparse
import time

import torch

from xir_tools.harness import delegate_count, load_method, lower_edge, outside_ops, run_method, to_buffer

VOCAB, POSITIONS = 100, 64
LENGTHS = (1, 5, 17, POSITIONS - 2)  # (RoBERTa's positions start after its padding index: 62 at most)


def build(name: str) -> torch.nn.Module:
    import transformers as t

    torch.manual_seed(0)
    common = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=POSITIONS,
    )
    if name == "bert":
        return t.BertForMaskedLM(t.BertConfig(**common)).eval()
    if name == "roberta":
        return t.RobertaForMaskedLM(t.RobertaConfig(**common, pad_token_id=1)).eval()
    if name == "distilbert":
        return t.DistilBertForMaskedLM(
            t.DistilBertConfig(
                vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=POSITIONS
            )
        ).eval()
    if name == "albert":
        return t.AlbertForMaskedLM(t.AlbertConfig(**common, embedding_size=16)).eval()
    raise ValueError(name)


class FillMask(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids, attention_mask).logits


def inputs(length: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    mask = torch.ones(1, length, dtype=torch.long)
    mask[0, length // 2 + 1 :] = 0
    return torch.randint(3, VOCAB, (1, length), generator=generator), mask


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["bert", "roberta", "distilbert", "albert"])
    parser.add_argument("--which", nargs="+", default=["stock", "xir"])
    parser.add_argument("--static", action="store_true", help="export at one length (17)")
    args = parser.parse_args()
    for name in args.models:
        module = FillMask(build(name))
        length = 17 if args.static else LENGTHS[-1]
        dynamic = (
            None
            if args.static
            else {"input_ids": {1: torch.export.Dim.AUTO}, "attention_mask": {1: torch.export.Dim.AUTO}}
        )
        with torch.no_grad():
            ep = torch.export.export(module, inputs(length), dynamic_shapes=dynamic, strict=True)
        for which in args.which:
            start = time.perf_counter()
            edge, _ = lower_edge(ep, which)
            delegates, outside = delegate_count(edge), outside_ops(edge)
            _, method = load_method(to_buffer(edge))
            errors = []
            for n in (17,) if args.static else LENGTHS:
                with torch.no_grad():
                    expected = module(*inputs(n, n))
                (actual,) = run_method(method, inputs(n, n))
                errors.append(f"{n}: {(actual - expected).abs().max().item():.1e}")
            print(
                f"{name:10s} {which:5s} delegates {delegates:2d}, outside {sum(outside.values()):3d} "
                f"{dict(outside)}; max |error| at length {', '.join(errors)} ({time.perf_counter() - start:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
