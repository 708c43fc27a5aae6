"""VLAPolicy: image + instruction + state -> action, with a Transformer over all their tokens.

    image [B,H,W,3] ─ ImageEncoder (FiLM(instruction) on content) ─> [B,Np,D] ─ + type ─┐
    image [B,H,W,3] ─ KeypointEncoder (spatial softmax) ─> keypoints [B,Nk,D] ─ + type ─┤
    tokens [B,L] ──── TextEncoder ──> words   [B,L,D] ────────────────────── + type ─┤ concat
    state [B,S] ─ normalise ─ StateEncoder ─> [B,1,D] ────────────────────── + type ─┤ [B,T,D]
    ("self" readout) learned queries [B,R,D] ─────────────────────────────── + type ─┘
                                                                                     │
                     TransformerEncoder (PAD words masked as keys) ─> Readout ─> [B,R,D]
                                                                                     │
                 head: loss vs normalised action chunk / predict ─> unnormalise ─> [B,K,A]

A chunk holds this step's action and the K-1 that follow it (K = `chunk_size`, ACT's action
chunking); `predict_action` executes `n_action_steps` of each chunk before querying again.

The parts arrive already built (Hydra `_target_` nodes), so each can be swapped from a config;
the policy owns only what ties them together: the per-group type embeddings, the token layout,
and the conversions between env units and the network's units. With
`target_keypoint_weight`, training adds a loss that pulls keypoint 0 onto the named target
(privileged supervision; rollouts never see the target's position).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor, nn

from vla import keys
from vla.errors import ConfigError
from vla.models.film import FiLM, masked_mean
from vla.models.heads import ActionHead
from vla.models.heads.base import mean_over_real_steps
from vla.models.image_encoder import ImageEncoder
from vla.models.keypoints import KeypointEncoder
from vla.models.normalizer import Normalizer
from vla.models.observation import prepare_observation
from vla.models.readout import Readout
from vla.models.state_encoder import StateEncoder
from vla.models.text_encoder import TextEncoder
from vla.models.tokenizer import Tokenizer
from vla.models.transformer import TransformerEncoder


class VLAPolicy(nn.Module):
    """Vision-language-action policy trained by behavior cloning.

    Args:
        tokenizer: instruction text -> ids (its vocabulary is saved with the weights).
        image_encoder: image -> patch tokens.
        text_encoder: ids -> word tokens and PAD mask.
        state_encoder: normalised state -> one token.
        encoder: the Transformer over the token sequence.
        readout: action queries ("self": in the sequence, "cross": attending to it).
        head: readout features -> normalised actions, and the training loss.
        normalizer: state / action statistics (set from the dataset with `set_normalization`).
        d_model: token width; every part must agree on it.
        film: optional FiLM conditioning of the patches on the instruction (None: off).
        keypoints: optional spatial-softmax keypoint tokens, placed after the patches
            (None: off).
        target_keypoint_weight: weight of an auxiliary loss that pulls keypoint 0 onto the
            named target (needs `keypoints` and batches with TARGET; 0: off). Privileged
            supervision for training only: at rollout the policy still sees only image,
            instruction and state.
        n_action_steps: N, actions of each predicted chunk executed before the next query
            (1 <= N <= head.chunk_size).
    """

    def __init__(
        self,
        *,
        tokenizer: Tokenizer,
        image_encoder: ImageEncoder,
        text_encoder: TextEncoder,
        state_encoder: StateEncoder,
        encoder: TransformerEncoder,
        readout: Readout,
        head: ActionHead,
        normalizer: Normalizer,
        d_model: int,
        film: FiLM | None = None,
        keypoints: KeypointEncoder | None = None,
        target_keypoint_weight: float = 0.0,
        n_action_steps: int = 1,
    ):
        super().__init__()
        if target_keypoint_weight < 0 or (target_keypoint_weight > 0 and keypoints is None):
            raise ConfigError(
                f"target_keypoint_weight={target_keypoint_weight} must be >= 0, and > 0 only "
                "with keypoints: set model.keypoints > 0, or model.target_keypoint_weight=0"
            )
        self.target_keypoint_weight = target_keypoint_weight
        if not 1 <= n_action_steps <= head.chunk_size:
            raise ConfigError(
                f"n_action_steps={n_action_steps} must be between 1 and the head's "
                f"chunk_size={head.chunk_size}"
            )
        self.n_action_steps = n_action_steps
        self._queue: list[Tensor] = []  # predict_action's actions still to execute, [B,A] each
        parts = {
            "image_encoder": image_encoder,
            "text_encoder": text_encoder,
            "state_encoder": state_encoder,
            "encoder": encoder,
            "readout": readout,
            "head": head,
        }
        if film is not None:
            parts["film"] = film
        if keypoints is not None:
            parts["keypoints"] = keypoints
        for name, part in parts.items():
            if part.d_model != d_model:
                raise ConfigError(f"{name}.d_model={part.d_model} does not match d_model={d_model}")
        checks = [
            ("tokenizer.vocab_size", tokenizer.vocab_size, "text_encoder.vocab_size", text_encoder.vocab_size),
            ("normalizer.state_dim", normalizer.state_dim, "state_encoder.state_dim", state_encoder.state_dim),
            ("normalizer.action_dim", normalizer.action_dim, "head.action_dim", head.action_dim),
            ("readout.num_readouts", readout.num_readouts, "head.num_readouts", head.num_readouts),
        ]  # fmt: skip
        for name_a, a, name_b, b in checks:
            if a != b:
                raise ConfigError(f"{name_a}={a} does not match {name_b}={b}")
        if tokenizer.max_len > text_encoder.max_len:
            raise ConfigError(
                f"tokenizer.max_len={tokenizer.max_len} exceeds text_encoder.max_len="
                f"{text_encoder.max_len}"
            )
        self.d_model = d_model
        self.tokenizer = tokenizer
        self.image_encoder = image_encoder
        self.text_encoder = text_encoder
        self.state_encoder = state_encoder
        self.film = film
        self.keypoints = keypoints
        self.encoder = encoder
        self.readout = readout
        self.head = head
        self.normalizer = normalizer
        # one vector per token group, so attention can tell a patch from a word from the state
        groups = ["image"] + (["keypoints"] if keypoints is not None else []) + ["text", "state"]
        groups += ["readout"] if readout.in_sequence else []
        self.type_embed = nn.ParameterDict(
            {g: nn.Parameter(torch.randn(d_model) * 0.02) for g in groups}
        )

    @property
    def action_dim(self) -> int:
        return self.head.action_dim

    @property
    def chunk_size(self) -> int:
        return self.head.chunk_size

    @property
    def queued_actions(self) -> int:
        """Actions of the last chunk that `predict_action` has still to hand out."""
        return len(self._queue)

    def reset(self) -> None:
        """Start of an episode: drop queued actions and restart the head's sampling noise."""
        self._queue = []
        self.head.reset()

    def set_normalization(self, state_mean, state_std, action_low, action_high) -> None:
        """Store the training set's statistics (array-likes of length S, S, A, A)."""
        self.normalizer.set_stats(state_mean, state_std, action_low, action_high)

    def token_layout(self, num_words: int | None = None) -> dict[str, slice]:
        """Where each group sits in the encoder's sequence (words: tokenizer.max_len by default)."""
        sizes = {"image": self.image_encoder.num_patches}
        if self.keypoints is not None:
            sizes["keypoints"] = self.keypoints.num_keypoints
        sizes["text"] = self.tokenizer.max_len if num_words is None else num_words
        sizes["state"] = 1
        if self.readout.in_sequence:
            sizes["readout"] = self.readout.num_readouts
        layout, start = {}, 0
        for name, size in sizes.items():
            layout[name] = slice(start, start + size)
            start += size
        return layout

    def num_tokens(self) -> int:
        """Length of the encoder's sequence."""
        return max(s.stop for s in self.token_layout().values())

    def encode(
        self,
        image: Tensor,
        state: Tensor,
        tokens: Tensor,
        need_weights: bool = False,
        extras: dict | None = None,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Readout features for a batch.

        Args:
            image: uint8 [B,H,W,3].
            state: env-unit state [B,S].
            tokens: int64 ids [B,L], PAD-padded.
            need_weights: also return the attention weights (encoder layers [B,H,T,T], then for
                a "cross" readout its weights [B,H,R,T]).
            extras: if given, receives intermediate results: "keypoints_xy" [B,K,2].

        Returns:
            features [B,R,D] (and the list of weights when asked).
        """
        B = image.shape[0]
        te = self.type_embed
        words, pad_mask = self.text_encoder(tokens)  # [B,L] -> [B,L,D], [B,L]
        pooled = self.readout.instruction_query or self.encoder.film or self.keypoints is not None
        instruction = masked_mean(words, pad_mask) if pooled else None  # [B,L,D] -> [B,D]
        film = None
        if self.film is not None:  # the instruction scales and shifts what each patch shows
            film = lambda content: self.film(content, words, pad_mask)  # noqa: E731
        patches = self.image_encoder(image, modulate=film)  # [B,H,W,3] -> [B,Np,D]
        state_tok = self.state_encoder(self.normalizer.normalize_state(state))  # [B,S] -> [B,1,D]
        visible = torch.zeros(B, 1, dtype=torch.bool, device=image.device)
        seq, masks = [patches + te["image"]], [visible.expand(B, patches.shape[1])]
        if self.keypoints is not None:
            xy, _ = self.keypoints.keypoints(image, instruction)  # [B,H,W,3] -> [B,K,2]
            points = self.keypoints.embed(xy)  # [B,K,2] -> [B,K,D]
            if extras is not None:
                extras["keypoints_xy"] = xy
            seq.append(points + te["keypoints"])
            masks.append(visible.expand(B, points.shape[1]))
        seq += [words + te["text"], state_tok + te["state"]]
        masks += [pad_mask, visible]
        if self.readout.in_sequence:
            seq.append(self.readout.query_tokens(B, instruction) + te["readout"])  # [B,R,D]
            masks.append(visible.expand(B, self.readout.num_readouts))
        x = torch.cat(seq, dim=1)  # -> [B,T,D]
        mask = torch.cat(masks, dim=1)  # -> [B,T], True = PAD

        if not need_weights:
            x = self.encoder(x, mask, cond=instruction)  # [B,T,D]
            return self.readout(x, mask, instruction=instruction)  # [B,T,D] -> [B,R,D]
        x, weights = self.encoder(x, mask, need_weights=True, cond=instruction)
        features, cross = self.readout(x, mask, need_weights=True, instruction=instruction)
        return features, weights + ([cross] if cross is not None else [])

    def forward(self, batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        """Behavior-cloning loss on a batch (keys from `vla.keys`; actions in env units).

        ACTION is [B,A] (one action per step, chunk_size 1) or [B,K,A] chunks, with
        ACTION_IS_PAD [B,K] marking the steps past an episode's end, which the loss ignores.

        Returns:
            scalar loss and detached scalar logs: "loss", the head's own terms, and
            "action_mse" (the predicted chunk vs the target's real steps, in env units).
        """
        action = batch[keys.ACTION]
        chunk = action if action.dim() == 3 else action[:, None]  # [B,A] -> [B,1,A]
        if chunk.shape[1] != self.chunk_size:
            raise ValueError(
                f"the batch holds chunks of {chunk.shape[1]} actions but the head predicts "
                f"chunk_size={self.chunk_size} (data.chunk_size must equal model.chunk_size)"
            )
        is_pad = batch.get(keys.ACTION_IS_PAD)  # [B,K] or None (every step real)
        extras = {}
        features = self.encode(
            batch[keys.IMAGE], batch[keys.STATE], batch[keys.TOKENS], extras=extras
        )
        target = self.normalizer.normalize_action(chunk)  # env units -> [-1,1], [B,K,A]
        loss, head_logs, pred = self.head.loss_and_prediction(features, target, is_pad)
        if self.target_keypoint_weight > 0:
            if keys.TARGET not in batch:
                raise KeyError(
                    f"model.target_keypoint_weight={self.target_keypoint_weight} needs the named "
                    f"target's position in the batch ('{keys.TARGET}'); set it to 0 to train "
                    "without the auxiliary loss"
                )
            aux = self.target_keypoint_loss(extras["keypoints_xy"], batch[keys.TARGET])
            loss = loss + self.target_keypoint_weight * aux
            head_logs = head_logs | {"target_keypoint_mse": aux.detach()}
        with torch.no_grad():
            error = (self.normalizer.unnormalize_action(pred) - chunk).square()  # [B,K,A]
            mse = mean_over_real_steps(error, is_pad)
        return loss, {"loss": loss.detach(), **head_logs, "action_mse": mse}

    @staticmethod
    def target_keypoint_loss(keypoints_xy: Tensor, target: Tensor) -> Tensor:
        """Squared distance of keypoint 0 [B,K,2] (image coordinates in [-1,1]) from the named
        target [B,2] (arena units in [0,1]^2, which map onto the image as x -> columns,
        y -> rows, so the conversion is 2 * target - 1)."""
        return (keypoints_xy[:, 0] - (2 * target - 1)).square().sum(-1).mean()

    def predict_chunk_tensors(self, image: Tensor, state: Tensor, tokens: Tensor) -> Tensor:
        """Batched action chunks in env units, clipped to [-1,1]: [B,K,A] (eval mode, no
        autograd). One query; it keeps no state (a sampling head advances its noise stream)."""
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode():
                features = self.encode(image, state, tokens)  # [B,R,D]
                chunk = self.normalizer.unnormalize_action(self.head.predict(features))
                return chunk.clamp(-1.0, 1.0)  # [B,K,A]
        finally:
            self.train(was_training)

    def predict_action_tensors(self, image: Tensor, state: Tensor, tokens: Tensor) -> Tensor:
        """The first action of each predicted chunk: [B,A] in env units (no queue)."""
        return self.predict_chunk_tensors(image, state, tokens)[:, 0]  # [B,K,A] -> [B,A]

    def predict_action(self, obs: Mapping) -> np.ndarray:
        """Next action for raw env observations, ACT's `select_action`: a query predicts a
        chunk, whose first `n_action_steps` actions are handed out one per call before the next
        query. Call `reset()` at the start of every episode.

        Args:
            obs: {"image": uint8 [H,W,3] | [B,H,W,3], "state": [S] | [B,S],
                  "instruction": str | list[str]} (numpy or torch); a batch is a set of
                  episodes stepped together.

        Returns:
            float32 numpy actions in env units: [A] for one observation, [B,A] for a batch.
        """
        device = next(self.parameters()).device
        image, state, tokens, batched = prepare_observation(obs, self.tokenizer, device)
        if self._queue and self._queue[0].shape[0] != image.shape[0]:
            raise ValueError(
                f"{self._queue[0].shape[0]} episodes have queued actions but {image.shape[0]} "
                "observations came: call reset() at the start of every episode"
            )
        if not self._queue:
            chunk = self.predict_chunk_tensors(image, state, tokens).cpu()  # [B,K,A]
            self._queue = list(chunk[:, : self.n_action_steps].unbind(dim=1))  # N x [B,A]
        action = self._queue.pop(0).numpy()  # [B,A]
        return action.astype(np.float32) if batched else action[0].astype(np.float32)

    def attention_maps(
        self, image: Tensor, state: Tensor, tokens: Tensor
    ) -> tuple[list[Tensor], dict[str, slice]]:
        """Attention weights for visualisation (eval mode, no autograd).

        Returns:
            weights: one [B,H,T,T] per encoder layer, plus [B,H,R,T_obs] for a "cross" readout;
                every row sums to 1 over the keys.
            layout: group name -> slice of the sequence (the keys' axis).
        """
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode():
                _, weights = self.encode(image, state, tokens, need_weights=True)
        finally:
            self.train(was_training)
        return weights, self.token_layout(num_words=tokens.shape[1])

    def flops_per_sample(self) -> int:
        """Analytic forward FLOPs (2 x multiply-adds of the matmuls) for one sample.

        Training costs about 3x this (forward + backward). Elementwise ops, norms and softmax
        are left out: they are a few percent at these sizes.
        """
        layout = self.token_layout()
        T = self.num_tokens()
        t_obs = layout["state"].stop
        film = self.film.flops() if self.film is not None else 0
        film += self.keypoints.flops() if self.keypoints is not None else 0
        return (
            self.image_encoder.flops()
            + film
            + self.state_encoder.flops()
            + self.encoder.flops(T)
            + self.readout.flops(t_obs)
            + self.head.flops()
        )
