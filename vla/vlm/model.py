"""VLMPolicy: one prefix-LM Transformer that answers questions and acts, over one vocabulary.

    prefix (bidirectional)                                   suffix (causal)
    words [B,L] ─ token_embed ─┬─ + word_pos ──────────────> [B,L,D] ──┐
                               └─ mean (and words) ─> the eyes          │
    image [B,H,W,3] ─ FiLMConvVision(words) ─> [B,N,D] ────────────────┼─ + type ─> [B,P,D] ┐
    state [B,S] ─ normalise ─ StateEncoder ─> [B,1,D] (PAD for questions) ┘                    │
    <bos> a_1 .. a_n ─ token_embed + suffix_pos ─> [B,s,D] ─ + type ────────────────────────┴─>
        [B,P+s,D] ─ PrefixLMBlock x depth (prefix-LM mask) ─ LayerNorm ─ lm_head (tied) ─> [B,s,V]

The answer to a question and the action chunk of an instruction are both the suffix: answer
words or <loc_i> tokens then <eos>, or K*A action-bin tokens (x then y, step by step). Decoding
is greedy, with a KV cache, and constrained: answers never emit action tokens, actions only
action tokens. The rollouts' API (`predict_chunk_tensors`, `tokenizer`, `chunk_size`,
`n_action_steps`, `normalizer`, `reset`, `inference`) is the one `VLAPolicy` offers.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from vla.errors import ConfigError
from vla.models.language import PAD_ID, UNK_ID
from vla.models.policy import build_part
from vla.models.state import Normalizer, StateEncoder
from vla.pretrained.mixin import PretrainedMixin
from vla.vlm.actions import ActionBins
from vla.vlm.prefix_lm import KVCache, PrefixLMBlock, prefix_lm_allowed
from vla.vlm.vocab import VLMTokenizer

GROUPS = ("image", "text", "state", "suffix")


class VLMPolicy(PretrainedMixin, nn.Module):
    """Vision-language(-action) model: prefix-LM over the eyes' tokens, words and state.

    Args:
        tokenizer: a partial of `VLMTokenizer` (given `max_len=max_words`).
        vision: a partial of `FiLMConvVision` (given image_size and d_model).
        image_size, state_dim, action_dim: the env's.
        d_model, n_heads, depth, mlp_ratio, dropout, attn_impl: the Transformer's.
        max_words: most words in a question or instruction.
        max_answer: most answer tokens before <eos>.
        chunk_size: K actions per query, A*K tokens; n_action_steps: N <= K executed.
        init_from: a stage-1 run (folder or .ckpt) whose weights training starts from
            (`VLMModule.setup`; kept here so the config records it); None: from scratch.
    """

    def __init__(
        self, *, tokenizer, vision, image_size: int, state_dim: int, action_dim: int,
        d_model: int, n_heads: int, depth: int, mlp_ratio: float = 4, dropout: float = 0.0,
        attn_impl: str = "sdpa", max_words: int = 16, max_answer: int = 12,
        chunk_size: int = 1, n_action_steps: int = 1, init_from: str | None = None,
    ):  # fmt: skip
        super().__init__()
        if not 1 <= n_action_steps <= chunk_size:
            raise ConfigError(
                f"n_action_steps={n_action_steps} must be between 1 and chunk_size={chunk_size}"
            )
        self.d_model, self.max_answer, self.init_from = d_model, max_answer, init_from
        self.n_action_steps, self._chunk_size = n_action_steps, chunk_size
        self.image_size = image_size
        self.tokenizer: VLMTokenizer = build_part("tokenizer", tokenizer, {}, max_len=max_words)
        self.vision = build_part("vision", vision, {}, image_size=image_size, d_model=d_model)
        V = self.tokenizer.vocab_size
        self.token_embed = nn.Embedding(V, d_model)
        nn.init.normal_(self.token_embed.weight, std=0.02)
        self.word_pos = nn.Parameter(torch.randn(max_words, d_model) * 0.02)
        self.max_suffix = max(max_answer + 1, chunk_size * action_dim)
        self.suffix_pos = nn.Parameter(torch.randn(self.max_suffix, d_model) * 0.02)
        self.state_encoder = StateEncoder(state_dim, d_model)
        self.type_embed = nn.ParameterDict(
            {g: nn.Parameter(torch.randn(d_model) * 0.02) for g in GROUPS}
        )
        self.blocks = nn.ModuleList(
            PrefixLMBlock(d_model, n_heads, mlp_ratio, dropout, attn_impl, index=i)
            for i in range(depth)
        )
        self.norm = nn.LayerNorm(d_model)
        self.normalizer = Normalizer(state_dim, action_dim)
        self.action_bins = ActionBins(action_dim, self.tokenizer.action_bins)

    # ---- the policy API the rollouts use ----
    @property
    def chunk_size(self) -> int:
        return self._chunk_size

    @property
    def action_dim(self) -> int:
        return self.action_bins.action_dim

    def num_tokens(self, num_words: int | None = None) -> int:
        L = self.tokenizer.max_len if num_words is None else num_words
        return self.vision.num_tokens + L + 1 + self.max_suffix

    def reset(self) -> None:
        """Start of an episode: nothing queued for `select_action` (greedy decoding draws no
        noise, so there is no stream to restart)."""
        self._action_runner = None

    # ---- the sequence ----
    def prefix(self, image, state, tokens, has_state) -> tuple[Tensor, Tensor, dict]:
        """Prefix tokens [B,P,D], PAD mask [B,P] (True = PAD), P = N + L + 1, and the eyes'
        outputs (keypoints_xy [B,K,2]).

        Args:
            image uint8 [B,H,W,3], state env units [B,S], tokens [B,L], has_state bool [B]
            (False: a question, whose state slot is PAD).
        """
        B, L = tokens.shape
        t = self.type_embed
        words, no_word = self.token_embed(tokens), tokens == PAD_ID  # [B,L,D], [B,L]
        text = words + self.word_pos[:L]  # [B,L,D]
        seen = self.vision(image, words, no_word, text)  # [B,N,D] given the words
        st = self.state_encoder(self.normalizer.normalize_state(state))  # [B,1,D]
        x = torch.cat([seen.tokens + t["image"], text + t["text"], st + t["state"]], dim=1)
        always = torch.zeros_like(seen.tokens[..., 0], dtype=torch.bool)  # [B,N]
        pad = torch.cat([always, no_word, ~has_state[:, None]], dim=1)  # [B,P]
        return x, pad, seen.outputs

    def embed_suffix(self, ids: Tensor, start: int = 0) -> Tensor:
        """Suffix ids [B,s] at suffix positions start.. -> [B,s,D]."""
        s = ids.shape[1]
        return (
            self.token_embed(ids) + self.suffix_pos[start : start + s] + self.type_embed["suffix"]
        )

    def run(self, x, allowed, cache: KVCache | None = None) -> Tensor:
        """The blocks and the final norm: [B,t,D] -> [B,t,D]."""
        for block in self.blocks:
            x = block(x, allowed, cache)
        return self.norm(x)

    def lm_head(self, h: Tensor) -> Tensor:
        """Features [...,D] -> logits [...,V] over the vocabulary, by the input embedding table
        itself (tied: one vector per token, read and written)."""
        return nn.functional.linear(h, self.token_embed.weight)

    def suffix_logits(self, image, state, tokens, has_state, suffix_in) -> tuple[Tensor, dict]:
        """Teacher forcing: logits [B,s,V] of the token after each suffix input [B,s], and the
        eyes' outputs (for the training-only keypoint loss)."""
        x, pad, outputs = self.prefix(image, state, tokens, has_state)  # [B,P,D], [B,P]
        P = x.shape[1]
        x = torch.cat([x, self.embed_suffix(suffix_in)], dim=1)  # [B,P+s,D]
        pad = torch.cat([pad, suffix_in == PAD_ID], dim=1)  # [B,P+s]
        h = self.run(x, prefix_lm_allowed(P, pad))  # [B,P+s,D]
        return self.lm_head(h[:, P:]), outputs  # [B,s,D] -> [B,s,V]

    # ---- decoding ----
    def vocab_mask(self, actions: bool, device) -> Tensor:
        """bool [V]: the ids a decoding step may emit (actions: only action bins; answers:
        anything but action bins, PAD, UNK and <bos>)."""
        tok = self.tokenizer
        ids = torch.arange(tok.vocab_size, device=device)
        is_action = ids >= tok.action_start
        if actions:
            return is_action
        return ~is_action & (ids != PAD_ID) & (ids != UNK_ID) & (ids != tok.bos_id)

    @torch.no_grad()
    def generate(self, image, state, tokens, has_state, steps: int, actions: bool, cache=True):
        """Greedy constrained decoding of `steps` suffix tokens: ids [B,<=steps] (answers stop
        once every row has its <eos>). With `cache`, the prefix and <bos> run once and each
        step attends to the cached keys and values (`decode`); without, every step recomputes
        the whole sequence (the reference)."""
        if cache:
            x, pad, _ = self.prefix(image, state, tokens, has_state)  # [B,P,D], [B,P]
            return self.decode(x, pad, steps, actions)
        allowed_ids = self.vocab_mask(actions, tokens.device)  # [V]
        out = torch.full_like(tokens[:, :1], self.tokenizer.bos_id)  # [B,1]
        for _ in range(steps):
            logits = self.suffix_logits(image, state, tokens, has_state, out)[0][:, -1]
            nxt = logits.masked_fill(~allowed_ids, float("-inf")).argmax(-1)  # [B]
            out = torch.cat([out, nxt[:, None]], dim=1)
        return out[:, 1:]

    @torch.no_grad()
    def decode(self, x: Tensor, pad: Tensor, steps: int, actions: bool) -> Tensor:
        """`generate` with a KV cache from prefix tokens x [B,P,D] and their PAD mask [B,P]
        (what `prefix` returns, so a caller can keep the eyes' outputs): ids [B,<=steps]."""
        allowed_ids = self.vocab_mask(actions, x.device)  # [V]
        out = torch.full((x.shape[0], 1), self.tokenizer.bos_id, device=x.device)  # [B,1]
        kv = KVCache()
        P = x.shape[1]
        x = torch.cat([x, self.embed_suffix(out)], dim=1)  # + <bos>: [B,P+1,D]
        pad = torch.cat([pad, torch.zeros_like(pad[:, :1])], dim=1)  # [B,P+1]
        h = self.run(x, prefix_lm_allowed(P, pad), kv)[:, -1]  # [B,D]
        for s in range(steps):
            logits = self.lm_head(h).masked_fill(~allowed_ids, float("-inf"))  # [B,V]
            out = torch.cat([out, logits.argmax(-1, keepdim=True)], dim=1)  # [B,s+2]
            done = (out[:, 1:] == self.tokenizer.eos_id).any(-1).all()  # every answer ended
            if s == steps - 1 or (done and not actions):
                break
            pad = torch.cat([pad, torch.zeros_like(pad[:, :1])], dim=1)  # [B,T]
            allowed = pad.logical_not()[:, None, None, :]  # one query sees the cache and itself
            h = self.run(self.embed_suffix(out[:, -1:], s + 1), allowed, kv)[:, -1]  # [B,D]
        return out[:, 1:]

    @torch.no_grad()
    def bos_attention(self, image, state, tokens) -> tuple[list[Tensor], dict]:
        """Where an action starts looking: the <bos> query's attention over the prefix and
        itself, one [B,H,P+1] per layer (keys: the eyes' N tokens, then the L words, the
        state, <bos>), and the eyes' outputs (keypoints_xy [B,K,2])."""
        with self.inference():
            has_state = torch.ones(len(tokens), dtype=torch.bool, device=tokens.device)
            x, pad, outputs = self.prefix(image, state, tokens, has_state)  # [B,P,D]
            bos = torch.full_like(tokens[:, :1], self.tokenizer.bos_id)  # [B,1]
            x = torch.cat([x, self.embed_suffix(bos)], dim=1)  # [B,P+1,D]
            allowed = prefix_lm_allowed(x.shape[1] - 1, torch.cat([pad, pad[:, :1] & False], 1))
            rows = []
            for block in self.blocks:
                x, weights = block(x, allowed, need_weights=True)  # [B,H,P+1,P+1]
                rows.append(weights[:, :, -1])  # the <bos> row: [B,H,P+1]
        return rows, outputs

    def predict_chunk_tensors(self, image: Tensor, state: Tensor, tokens: Tensor) -> Tensor:
        """Observations -> action chunks [B,K,A] in env units, clipped to [-1,1]."""
        with self.inference():
            has_state = torch.ones(len(tokens), dtype=torch.bool, device=tokens.device)
            K, A = self.chunk_size, self.action_dim
            ids = self.generate(image, state, tokens, has_state, K * A, actions=True)  # [B,K*A]
            return self.action_bins.from_tokens(ids, self.tokenizer.action_start).clamp(-1, 1)

    def answer(self, image: Tensor, questions: list[str]) -> list[str]:
        """Greedy answers to questions about images uint8 [B,H,W,3] (no state)."""
        with self.inference():
            tokens = self.tokenizer.encode(questions).to(image.device)  # [B,L]
            B = len(tokens)
            state = torch.zeros(B, self.normalizer.state_dim, device=image.device)
            has_state = torch.zeros(B, dtype=torch.bool, device=image.device)
            ids = self.generate(image, state, tokens, has_state, self.max_answer + 1, False)
            return [self.tokenizer.answer_text(row) for row in ids.tolist()]
