"""Halo's models as PyG models: parameter names and shapes, and the module that holds them.

Halo's layers are PyG's: ``GCNConv`` (symmetric normalisation with self loops), ``SAGEConv``
with mean aggregation and ``GATConv`` with self loops. A hidden layer is
``conv -> [LayerNorm] -> activation`` (dropout is off in inference); the last layer is a conv
alone (GAT: its heads averaged). Halo applies a weight as ``x @ W`` with ``W`` of shape
(in, out); PyG's ``Linear`` holds (out, in), so weights are transposed.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np


def state_dict(model: Dict[str, Any], params: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """``params`` (Halo's names) under the names of the module :func:`build` makes."""
    kind, layers = model["kind"], model["layers"]
    out: Dict[str, np.ndarray] = {}
    for layer in range(layers):
        conv, pyg = f"conv{layer}", f"convs.{layer}"
        if kind == "gcn":
            out[f"{pyg}.lin.weight"] = np.ascontiguousarray(params[f"{conv}.weight"].T)
            out[f"{pyg}.bias"] = params[f"{conv}.bias"].reshape(-1)
        elif kind == "sage":
            out[f"{pyg}.lin_l.weight"] = np.ascontiguousarray(params[f"{conv}.weight_neigh"].T)
            out[f"{pyg}.lin_l.bias"] = params[f"{conv}.bias"].reshape(-1)
            out[f"{pyg}.lin_r.weight"] = np.ascontiguousarray(params[f"{conv}.weight_self"].T)
        elif kind == "gat":
            att_src, att_dst = params[f"{conv}.att_src"], params[f"{conv}.att_dst"]
            out[f"{pyg}.lin.weight"] = np.ascontiguousarray(params[f"{conv}.weight"].T)
            out[f"{pyg}.att_src"] = att_src.reshape(1, *att_src.shape)
            out[f"{pyg}.att_dst"] = att_dst.reshape(1, *att_dst.shape)
            out[f"{pyg}.bias"] = params[f"{conv}.bias"].reshape(-1)
        else:
            raise ValueError(f"model kind {kind!r}: expected gcn, sage or gat")
        if model.get("layer_norm") and layer + 1 < layers:
            out[f"norms.{layer}.weight"] = params[f"norm{layer}.gamma"].reshape(-1)
            out[f"norms.{layer}.bias"] = params[f"norm{layer}.beta"].reshape(-1)
    return out


def _activation(spec: Any) -> Any:
    """The torch function of Halo's activation (``"relu"``, ``{"elu": {"alpha": 1.0}}``, ...)."""
    import torch.nn.functional as F

    name, args = (spec, {}) if isinstance(spec, str) else next(iter(spec.items()))
    if name == "relu":
        return F.relu
    if name == "elu":
        return lambda x: F.elu(x, alpha=args.get("alpha", 1.0))
    if name == "leaky_relu":
        return lambda x: F.leaky_relu(x, negative_slope=args.get("slope", 0.01))
    raise ValueError(f"activation {spec!r}: expected relu, elu or leaky_relu")


def build(model: Dict[str, Any], weights: Dict[str, np.ndarray]) -> Any:
    """The PyG module of ``model`` (a sidecar's ``model``) with ``weights`` loaded, in eval mode."""
    import torch
    from torch_geometric.nn import GATConv, GCNConv, SAGEConv

    kind, layers = model["kind"], model["layers"]
    hidden, heads = model["hidden"], model["heads"]
    activation = _activation(model["activation"])

    class HaloModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.convs = torch.nn.ModuleList()
            self.norms = torch.nn.ModuleList()
            width = model["in_dim"]
            for layer in range(layers):
                last = layer + 1 == layers
                out = model["out_dim"] if last else hidden
                if kind == "gcn":
                    conv = GCNConv(width, out)
                elif kind == "sage":
                    conv = SAGEConv(width, out, aggr="mean")
                else:
                    conv = GATConv(
                        width,
                        out,
                        heads=model["out_heads"] if last else heads,
                        concat=not last,
                        negative_slope=0.2,
                        add_self_loops=True,
                    )
                self.convs.append(conv)
                width = out if (kind != "gat" or last) else out * heads
                if model.get("layer_norm") and not last:
                    self.norms.append(torch.nn.LayerNorm(width, eps=1e-5))

        def forward(self, x: Any, edge_index: Any) -> Any:
            for layer, conv in enumerate(self.convs):
                x = conv(x, edge_index)
                if layer + 1 < len(self.convs):
                    if len(self.norms):
                        x = self.norms[layer](x)
                    x = activation(x)
            return x

    module = HaloModel()
    module.load_state_dict({name: torch.from_numpy(np.array(value)) for name, value in weights.items()})
    return module.eval()
