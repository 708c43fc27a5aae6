"""The first referent not yet reached: what conditions vision in a chain of any length.

    words [B,L,D], ids [B,L] ─ mean within each referent ("then" opens one) ─> refs [B,R,D]
    refs ─ KeypointEncoder gain ─> keypoint k's map per referent [B,R,H*W] (k = `keypoint`)
         ─ the detector's features at the map's peak (read="peak") or pooled by it ("map"),
           [B,R,C], or the image's colour at the peak ("pixel"), [B,R,3]
         ─ Linear ─ sigmoid ─> done [B,R]
    weights w_r = (1 - done_r) * prod_{s<r} done_s, the last referent taking what is left
    current referent = sum_r w_r refs_r [B,D]: the vector the keypoints, FiLM and readout use

Pooled as a bag, "reach the red circle then the blue square then the green triangle" asks
vision for all three shapes at once, and a policy trained on two-step chains learns "after
the first, the last", which is right for every chain it saw and wrong for a third step.
A shape already reached is drawn dimmed, so whether a referent is done can be read off the
image where that referent's keypoint lands; the first referent not done is then a product
over the referents before it, which is the same operation for the third referent as for
the second (MAC's and neural module networks' reading of an instruction one part at a time).
An instruction of one referent (every other family) gets w_0 = 1: its pooled words, as
without this part.

Where "done" is read matters. Pooled over the softmax map, a smaller shape mixes more floor
into the features, which reads as dimming (docs/generalisation.md); the features at the
map's peak pixel see the shape alone whatever its size, provided the map lands on it: the
detector learns to find shapes to reach, which are never dimmed, so a reached referent's map
goes elsewhere unless taught. Training-only losses can teach both: each reached referent's
keypoint onto its shape (`bc.referent_keypoint_weight`) and done against the stage the
demonstrations record (`bc.referent_done_weight`).

Those maps can come from the policy's keypoint detector (`detector="shared"`: its 32 channels
and instruction gain then serve the target's keypoint and every referent's, dimmed or not) or
from a detector of the selector's own (`detector="own"`: a second convolution of the
keypoints' width and window, gain and map, which no target loss trains: the referent-keypoint
loss then also pulls the referent to reach now onto its shape, so that its map sits on the
shape whose dimming it must read before that shape is reached; the action loss reaches it
through the weights).
"""

from __future__ import annotations

import torch
from einops import rearrange, repeat
from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.keypoints import KeypointEncoder
from vla.models.tokenizer import PAD_ID, default_vocabulary


def referent_numbers(tokens: Tensor, then_id: int) -> Tensor:
    """Which referent each word is in: ids [B,L] -> [B,L] (0 up to the first "then", ...)."""
    return (tokens == then_id).long().cumsum(-1)


class ReferentSelector(nn.Module):
    """Words [B,L,D] -> the current referent's vector [B,D].

    Args:
        d_model: word width.
        hidden: C, channels of the keypoint detector's features it reads "done" from.
        read: where: "peak", the features at the pixel where each referent's map peaks,
            "map", the features pooled by the whole map, or "pixel", the image's colour at
            the peak (a dimmed shape is darker at its centre whatever its size).
        keypoint: which keypoint's map of each referent is read (0: the one that finds the
            shape to reach; another leaves that one to its task).
        detector: whose maps: "shared", the policy's keypoint detector's, or "own", a
            one-map detector of the selector's (then `keypoint` must be 0).
        detach: the words reach the maps as constants, so the losses on the maps and on
            done (and the action loss through them) train the detector and the done read but
            never the words that also condition vision.
        image_size, kernel_size: the own detector's input side and window (the policy's).
    """

    def __init__(
        self,
        d_model: int,
        hidden: int,
        read: str = "map",
        keypoint: int = 0,
        detector: str = "shared",
        detach: bool = False,
        image_size: int = 64,
        kernel_size: int = 7,
    ):
        super().__init__()
        if read not in ("peak", "map", "pixel"):
            raise ConfigError(f"model.referents.read={read!r} must be 'peak', 'map' or 'pixel'")
        if detector not in ("shared", "own"):
            raise ConfigError(f"model.referents.detector={detector!r} must be 'shared' or 'own'")
        if keypoint < 0 or (detector == "own" and keypoint != 0):
            raise ConfigError(
                f"model.referents.keypoint={keypoint} must be >= 0 (0 with detector=own)"
            )
        self.d_model, self.hidden, self.read, self.keypoint = d_model, hidden, read, keypoint
        self.detach = detach
        self.detector: KeypointEncoder | None = None  # None: the policy's keypoint detector
        if detector == "own":
            self.detector = KeypointEncoder(
                image_size, 1, d_model, hidden, film=True, kernel_size=kernel_size
            )
            del self.detector.to_token, self.detector.ids  # its maps are read, never tokens
        self.then_id = default_vocabulary().index("then")
        self.to_done = nn.Linear(3 if read == "pixel" else hidden, 1)  # [B,R,C] -> [B,R,1]
        nn.init.zeros_(self.to_done.weight)  # done = 0.5 everywhere at the start
        nn.init.zeros_(self.to_done.bias)

    def pool(self, words: Tensor, tokens: Tensor) -> tuple[Tensor, Tensor]:
        """Mean of each referent's words: [B,L,D], ids [B,L] -> refs [B,R,D] and valid [B,R]
        (False past an instruction's last referent); R = the most referents in the batch."""
        number = referent_numbers(tokens, self.then_id)  # [B,L]
        number = number.masked_fill(tokens == PAD_ID, -1)  # PAD is in no referent
        R = int(number.max()) + 1
        member = number[:, None] == torch.arange(R, device=tokens.device)[None, :, None]
        member = member.to(words.dtype)  # [B,R,L]: word l is in referent r
        count = member.sum(-1)  # [B,R]
        refs = member @ words / count.clamp(min=1.0)[..., None]  # [B,R,L] @ [B,L,D] -> [B,R,D]
        return refs, count > 0

    def count(self, tokens: Tensor) -> Tensor:
        """How many referents each instruction has: ids [B,L] -> [B] (1 + its "then"s)."""
        return (tokens == self.then_id).sum(-1) + 1

    def done_logits(self, features: Tensor, where: Tensor) -> Tensor:
        """Logits of P(referent reached) [B,R] from the detector's features (or the image's
        colours) [B,H*W,C] and each referent's map where [B,R,H*W]: read at its peak, or
        pooled by it."""
        if self.read != "map":
            peak = repeat(where.argmax(-1), "b r -> b r c", c=features.shape[-1])
            read = features.gather(1, peak)  # [B,H*W,C] at [B,R] -> [B,R,C]
        else:
            read = where @ features  # [B,R,H*W] @ [B,H*W,C] -> [B,R,C]
        return rearrange(self.to_done(read), "b r 1 -> b r")

    @staticmethod
    def weights(done: Tensor, valid: Tensor) -> Tensor:
        """The first referent not done, softly: done, valid [B,R] -> weights [B,R] summing
        to 1; an instruction's last referent takes whatever its earlier ones leave."""
        done = torch.where(valid, done, torch.ones_like(done))  # past the end: nothing to do
        before = torch.cumprod(torch.cat([torch.ones_like(done[:, :1]), done[:, :-1]], 1), 1)
        last = valid & ~torch.cat([valid[:, 1:], torch.zeros_like(valid[:, :1])], 1)  # [B,R]
        return before * torch.where(last, torch.ones_like(done), 1 - done) * valid

    def select(self, words: Tensor, tokens: Tensor, keypoints, hidden: Tensor, image: Tensor):
        """The current referent [B,D], the logits of done [B,R] and where each referent's
        keypoint (`keypoint`) is [B,R,2], from words [B,L,D], ids [B,L], the policy's
        KeypointEncoder and its detector's features [B,H*W,C] (the own detector reads the
        image [B,H,W,3] instead)."""
        refs, valid = self.pool(words, tokens)  # [B,R,D], [B,R]
        if self.detector is not None:
            keypoints, hidden = self.detector, self.detector.features(image)  # [B,H*W,C]
        k = self.keypoint
        said = refs.detach() if self.detach else refs  # [B,R,D]
        xy, where = keypoints.locate(hidden, said, num=k + 1)  # [B,R,k+1,(2|H*W)]
        read = hidden  # [B,H*W,C]
        if self.read == "pixel":  # colours in [0,1]
            read = rearrange(image, "b h w c -> b (h w) c").to(hidden.dtype) / 255
        logits = self.done_logits(read, where[:, :, k])  # [B,R]
        return self(refs, valid, torch.sigmoid(logits)), logits, xy[:, :, k]

    def forward(self, refs: Tensor, valid: Tensor, done: Tensor) -> Tensor:
        """refs [B,R,D], valid [B,R], done [B,R] -> the current referent [B,D]."""
        w = self.weights(done, valid)  # [B,R]
        return torch.einsum("br,brd->bd", w, refs)
