"""The worked example of attention, run step by step: `python scripts/attention_example.py`.

One query, three keys: the query [1, 0] matches keys 0 and 2 equally (dot product 1) and key 1
not at all (0), so after the softmax keys 0 and 2 share most of the weight and the output is
mostly their values. The same function computes every attention layer of the policy.
"""

import math

import torch

from vla.models.attention import scaled_dot_product

q = torch.tensor([[1.0, 0.0]])  # [Tq=1, Dk=2]
k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # [Tk=3, Dk=2]
v = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]])  # [Tk=3, Dv=2]


def show(name: str, x: torch.Tensor) -> None:
    print(f"{name:<34} {[round(float(e), 3) for e in x.flatten()]}")


if __name__ == "__main__":
    show("scores q k^T", q @ k.T)  # [1,2] @ [2,3] -> [1,3]
    show("scaled by 1/sqrt(Dk)", q @ k.T / math.sqrt(k.shape[-1]))
    out, weights = scaled_dot_product(q, k, v)
    show("weights softmax(scores)", weights)  # [1,3], sums to 1
    show("output weights @ v", out)  # [1,3] @ [3,2] -> [1,2]
    print("(vla.models.attention.scaled_dot_product; tests/models/test_attention.py)")
