"""MLP-Mixer token mixing (Tolstikhin et al.): an MLP across tokens, shared over channels.

Built, as in the authors' code, from kernel-1 ``Conv1d`` layers that treat the tokens of a (b, n, c)
input as channels. It is an ``nn.Sequential`` so that, like theirs, it is not itself a hooked module
in the torchsummary accounting. It has no attention map (a nonlinear MLP over tokens has no
token-to-token matrix): ``attention_map`` raises.
"""
from torch import nn


class TokenMLP(nn.Sequential):
    mechanism = "MLP-Mixer (token MLP)"  # what the synthesis page groups it under (``report.claims.synthesis``)
    draws_map = False  # a declaration the maps' code reads (``layers.maps.draws_map``); map_description says why
    map_description = ("no attention map: MLP-Mixer's token MLP (a nonlinear MLP across tokens) has no token-to-token "
                "matrix")

    def __init__(self, *, seq_len, expansion_factor=4, dropout=0.0, dim=None, heads=None, dim_head=None):
        if seq_len is None:
            raise ValueError("the token MLP needs seq_len (the number of tokens)")
        hidden = seq_len * expansion_factor
        super().__init__(nn.Conv1d(seq_len, hidden, 1), nn.GELU(), nn.Dropout(dropout),
                         nn.Conv1d(hidden, seq_len, 1), nn.Dropout(dropout))

    def attention_map(self, x):
        raise NotImplementedError(f"{self.map_description}; use gradient attributions instead")
