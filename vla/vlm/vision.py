"""The VLM's eyes: a small convolutional map FiLMed by the prefix words, read out as tokens.

    image uint8 [B,H,W,3] ─ [-1,1], + x, y ─> [B,5,H,W] ─ conv 3x3 ─ GELU
        ─ conv 3x3 dilated by d ─ FiLM(words) ─ GELU ─> features F [B,C,H,W] (full resolution)
    F ─ conv 1x1 (+ word queries) ─> K score maps ─ standardise ─ spatial softmax w_k [B,K,H*W]
        keypoint k:  where = w_k @ (x, y)  [2]    what = w_k @ F  [C]  (a glimpse)
        ─> Linear(where) + Linear(what) + id_k ─> K tokens [B,K,D]
    F ─ max and mean over pixels ─> Linear ─> 2 tokens [B,2,D] (what is there, how much)

Why not ViT patches: in this corpus a shape is 4-9 px, and "what colour is the circle" needs
the shape's outline before its colour can be read. A linear patch embedding cannot see an
outline, and a Transformer that must first learn which of 36 patches a question is about
sits on a plateau for thousands of steps (docs/vlm.md, round 3). Here the words gate the
feature channels before the pixels are pooled (FiLM, as CLEVR's FiLM networks and RT-1 do),
each keypoint says where its map peaks (the default policy's spatial softmax) and what is
there, and the pooled tokens say what the scene holds. A circle and a square of the same
area differ only at their outlines; with the second convolution dilated (d = 2 in
`model=vlm_small`) a feature sees 7x7 pixels, a whole shape from its middle, at the cost of
5x5, and the VLM answers 8 points more of the held-out questions (docs/vlm.md, round 29).
Keypoint 0 can be pulled onto the shape a question or instruction is about (a training-only
loss; `VLMModule`).

With `word_queries` (on in `model=vlm_small`), each keypoint also reads the words one at a
time: a learned query per keypoint attends over the positioned words, and what it reads
becomes a channel direction added to that keypoint's 1x1 score conv (zero at the start, so
training begins from the FiLM eyes). The mean of the words cannot say which of two named
shapes comes first ("is the red circle above the blue square"); a keypoint that attends to
the first noun phrase can (measured in docs/vlm.md, round 7).

With `relative` (on in `model=vlm_small`; docs/vlm.md, round 19), keypoint 0 also scores each
pixel by where it lies from keypoint 1: "the shape nearest the red circle" is a distance from
another shape's place, which no 3x3 feature can see. Keypoint 1's map is softmaxed first; its
place a gives four maps, dx, dy, the distance d and a bump exp(-(d/0.2)^2) (the anchor's own
shape), and what keypoint 0 read from the words weighs them (zero at the start):

    w_1 = softmax(scores_1)   a = w_1 @ (x, y)
    scores_0 += [x - a_x, y - a_y, d, bump] @ Linear(read_0)

A training-only loss pulls keypoint 1 onto the shape a relation is measured from
(`VLMModule`'s anchor_weight): "nearest" in 3-4 shape scenes went from 17-28% to 42-78% of
answers, and "nearest" episodes from 41-61% to 82-87% success (round 19, four seeds).
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.language import masked_mean
from vla.models.vision import TokenGroup, check_image, normalize_pixels, pixel_coordinates


class FiLMConvVision(nn.Module):
    """Image [B,H,W,3] and the prefix words [B,L,D] -> K + 2 tokens [B,K+2,D].

    Args:
        image_size: side of the square image in pixels.
        d_model: token width (and the width of the words that condition it).
        channels: C, feature channels of both convolutions.
        num_keypoints: K spatial-softmax keypoints, each with its glimpse.
        word_queries: each keypoint's score map also follows its own attention over the words
            (False: the eyes of checkpoints written before it, which load as they were).
        relative: keypoint 0's map also scores where pixels lie from keypoint 1 (needs
            word_queries and at least 2 keypoints).
        dilation: of the second convolution: 2 widens each feature's view from 5x5 to 7x7
            pixels at the same cost (1: the eyes of checkpoints written before it).
    """

    def __init__(
        self, image_size: int, d_model: int, channels: int = 32, num_keypoints: int = 8,
        word_queries: bool = False, relative: bool = False, dilation: int = 1,
    ):  # fmt: skip
        super().__init__()
        if channels < 1 or num_keypoints < 1 or dilation < 1:
            raise ConfigError(
                f"channels={channels}, num_keypoints={num_keypoints} and dilation={dilation} "
                "must be >= 1"
            )
        if relative and not (word_queries and num_keypoints >= 2):
            raise ConfigError(
                f"relative=true needs word_queries=true and num_keypoints >= 2 "
                f"(got word_queries={word_queries}, num_keypoints={num_keypoints})"
            )
        C, K = channels, num_keypoints
        self.image_size, self.num_tokens = image_size, K + 2
        self.conv1 = nn.Conv2d(5, C, 3, padding=1)  # [B,5,H,W] -> [B,C,H,W]
        self.conv2 = nn.Conv2d(C, C, 3, padding=dilation, dilation=dilation)  # -> [B,C,H,W]
        self.to_gamma_beta = nn.Linear(d_model, 2 * C)  # words [B,D] -> [B,2C]: identity at init
        nn.init.zeros_(self.to_gamma_beta.weight)
        nn.init.zeros_(self.to_gamma_beta.bias)
        self.to_scores = nn.Conv2d(C, K, 1, bias=False)  # -> [B,K,H,W]
        self.log_temperature = nn.Parameter(torch.zeros(K, 1))  # [K,1]
        xy = pixel_coordinates(image_size)  # [H,W,2] in [-1,1]
        self.register_buffer("grid_xy", rearrange(xy, "h w two -> (h w) two"), persistent=False)
        self.register_buffer("coords", xy[None], persistent=False)  # [1,H,W,2]
        self.where = nn.Linear(2, d_model)  # [B,K,2] -> [B,K,D]
        self.what = nn.Linear(C, d_model)  # [B,K,C] -> [B,K,D]
        self.ids = nn.Parameter(torch.randn(K, d_model) * 0.02)  # [K,D]
        self.pooled = nn.Linear(2 * C, 2 * d_model)  # max and mean [B,2C] -> 2 tokens
        self.word_queries = word_queries
        if word_queries:
            self.queries = nn.Parameter(torch.randn(K, d_model) * 0.02)  # [K,D]
            self.to_keys = nn.Linear(d_model, d_model, bias=False)  # words [B,L,D] -> [B,L,D]
            self.to_direction = nn.Linear(d_model, C)  # what a keypoint read [B,K,D] -> [B,K,C]
            nn.init.zeros_(self.to_direction.weight)
            nn.init.zeros_(self.to_direction.bias)
        self.relative = relative
        if relative:
            self.to_relative = nn.Linear(d_model, 4)  # what keypoint 0 read [B,D] -> [B,4]
            nn.init.zeros_(self.to_relative.weight)
            nn.init.zeros_(self.to_relative.bias)

    def features(self, image: Tensor, words: Tensor) -> Tensor:
        """image uint8 [B,H,W,3], pooled words [B,D] -> F [B,C,H,W]."""
        check_image(image, self.image_size)
        B = image.shape[0]
        x = torch.cat([normalize_pixels(image), self.coords.expand(B, -1, -1, -1)], -1)
        # [B,H,W,5] viewed as [B,5,H,W]: channels-last memory, on which CPU convolutions
        # (oneDNN) run faster than on [B,5,H,W] laid out plane by plane
        x = rearrange(x, "b h w c -> b c h w")
        h = self.conv2(nn.functional.gelu(self.conv1(x)))  # [B,C,H,W]
        gamma, beta = rearrange(self.to_gamma_beta(words), "b (two c) -> two b c 1 1", two=2)
        return nn.functional.gelu(h * (1 + gamma) + beta)  # [B,C,H,W]

    def read(self, text: Tensor, no_word: Tensor) -> Tensor:
        """Positioned words [B,L,D], PAD mask [B,L] -> what each keypoint's query reads [B,K,D]
        (its softmax attention over the words)."""
        keys = self.to_keys(text)  # [B,L,D]
        logits = torch.einsum("kd,bld->bkl", self.queries, keys) / keys.shape[-1] ** 0.5
        attn = logits.masked_fill(no_word[:, None], float("-inf")).softmax(-1)  # [B,K,L]
        attn = attn.nan_to_num(0.0)  # an all-PAD instruction reads nothing
        return attn @ text  # [B,K,L] @ [B,L,D] -> [B,K,D]

    def weights(self, scores: Tensor, first: int = 0) -> Tensor:
        """Score maps [B,k,H*W] of keypoints first.. -> spatial softmax weights [B,k,H*W]
        (each map standardised, then sharpened by its keypoint's learned temperature)."""
        std, mean = torch.std_mean(scores, dim=-1, keepdim=True)  # [B,k,1]
        temperature = self.log_temperature[first : first + scores.shape[1]].exp()  # [k,1]
        return ((scores - mean) / (std + 1e-5) * temperature).softmax(-1)

    def relative_scores(self, scores: Tensor, read0: Tensor) -> Tensor:
        """Score maps [B,K,H*W], keypoint 0's read [B,D] -> keypoint 0's extra score [B,H*W]:
        the pixels' offset and distance from keypoint 1's place, weighed by the words."""
        anchor = self.weights(scores[:, 1:2], first=1) @ self.grid_xy  # [B,1,2]
        delta = self.grid_xy - anchor  # [H*W,2] - [B,1,2] -> [B,H*W,2]
        d = (delta.square().sum(-1, keepdim=True) + 1e-6).sqrt()  # [B,H*W,1]
        maps = torch.cat([delta, d, torch.exp(-((d / 0.2) ** 2))], -1)  # [B,H*W,4]
        return torch.einsum("bpm,bm->bp", maps, self.to_relative(read0))  # [B,H*W]

    def forward(self, image: Tensor, words: Tensor, no_word: Tensor, text: Tensor) -> TokenGroup:
        """-> tokens [B,K+2,D] and outputs["keypoints_xy"] [B,K,2] (image coordinates).

        Args:
            image uint8 [B,H,W,3]; words [B,L,D] and their PAD mask no_word [B,L]; text [B,L,D]:
            the same words with their positions (what the word queries read).
        """
        f = self.features(image, masked_mean(words, no_word))  # [B,C,H,W]
        flat = rearrange(f, "b c h w -> b (h w) c")  # [B,H*W,C], a view of channels-last F
        direction = self.to_scores.weight[:, :, 0, 0].expand(len(f), -1, -1)  # 1x1 conv [B,K,C]
        if self.word_queries:
            read = self.read(text, no_word)  # [B,K,D]
            direction = direction + self.to_direction(read)  # + each keypoint's own [B,K,C]
        # the 1x1 conv and the word directions as one product: [B,K,C] @ [B,C,H*W]
        scores = direction @ flat.transpose(1, 2)  # [B,K,H*W]
        if self.relative:  # keypoint 1 first, then keypoint 0 from where it is
            extra = self.relative_scores(scores, read[:, 0])  # [B,H*W]
            scores = torch.cat([scores[:, :1] + extra[:, None], scores[:, 1:]], 1)  # [B,K,H*W]
        w = self.weights(scores)  # [B,K,H*W]
        xy = w @ self.grid_xy  # [B,K,H*W] @ [H*W,2] -> [B,K,2]
        glimpse = w @ flat  # [B,K,H*W] @ [B,H*W,C] -> [B,K,C]
        keypoints = self.where(xy) + self.what(glimpse) + self.ids  # [B,K,D]
        pooled = torch.cat([flat.max(1).values, flat.mean(1)], dim=-1)  # [B,2C]
        pooled = rearrange(self.pooled(pooled), "b (two d) -> b two d", two=2)  # [B,2,D]
        return TokenGroup(torch.cat([keypoints, pooled], 1), {"keypoints_xy": xy})
