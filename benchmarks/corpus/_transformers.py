"""Small Hugging Face encoders for the torch builder, randomly initialized from a config.

Each is wrapped in a module whose `forward` takes the graph inputs by name and returns
the outputs the entry names, as a tuple: transformers 5's `forward()` takes a cache and
flags positionally right after the tensors, which a tracer's positional call would bind
wrongly, and the exporters want tensors out, not a `ModelOutput`. The wrapper adds no
operation. BERT's vocabulary is the entry's `input_ids` range, so the ids `check` draws
are always valid.
"""

from __future__ import annotations

import torch
from transformers import BertConfig, BertModel, PreTrainedModel, ViTConfig, ViTModel

from benchmarks.corpus._registry import Entry


class _Outputs(torch.nn.Module):
    """Returns `names` of the wrapped model's output, in order."""

    def __init__(self, model: PreTrainedModel, names: tuple[str, ...]) -> None:
        super().__init__()
        self.model = model
        self.names = names

    def pick(self, output: object) -> tuple[torch.Tensor, ...]:
        return tuple(output[name] for name in self.names)


class TextEncoder(_Outputs):
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        return self.pick(self.model(input_ids=input_ids, attention_mask=attention_mask))


class ImageEncoder(_Outputs):
    def forward(self, pixel_values: torch.Tensor):
        return self.pick(self.model(pixel_values=pixel_values))


_BERT_SIZES = {
    "bert": {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 1024},
    # MiniLM-L6's shape (6 layers of 384, 12 heads): the sentence-embedding size
    "minilm": {"hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536},
}


def _bert(entry: Entry) -> torch.nn.Module:
    """BERT at the size the entry's architecture names (`_BERT_SIZES`)."""
    config = BertConfig(vocab_size=entry.input_ranges["input_ids"][1], **_BERT_SIZES[entry.architecture])
    return TextEncoder(BertModel(config), entry.outputs)


def _vit(entry: Entry) -> torch.nn.Module:
    config = ViTConfig(hidden_size=192, num_hidden_layers=6, num_attention_heads=3,
                       intermediate_size=768, image_size=224, patch_size=16)
    return ImageEncoder(ViTModel(config), entry.outputs)


_BUILDERS = {"bert": _bert, "minilm": _bert, "vit": _vit}


def network(entry: Entry) -> torch.nn.Module:
    return _BUILDERS[entry.architecture](entry)
