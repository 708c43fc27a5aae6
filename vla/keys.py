"""Batch keys shared by the data pipeline, the policy and the rollouts.

A training batch is a dict with these keys:
    IMAGE        uint8   [B,H,W,3]  the env's observation image, unnormalised
    STATE        float32 [B,S]      effector position and velocity (S = 4)
    TOKENS       int64   [B,L]      instruction token ids, PAD-padded to the longest
                                    instruction (L <= the tokenizer's max_len)
    ACTION       float32 [B,A]      the expert's (noise-free) action in env units, A = 2
                         [B,K,A]    with chunks (model.chunk_size=K > 1): this step's action
                                    and the K-1 that follow it in its episode
    ACTION_IS_PAD bool   [B,K]      with chunks: True where the chunk ran past its episode
    TARGET       float32 [B,2]      where the shape to reach now is, arena units in [0,1]^2:
                                    privileged; only while a training-only loss uses it
    OBJECTS      float32 [B,M,2]    where every shape in the scene is (M = env.num_targets),
                                    arena units: privileged, only for the object losses
    OBJECT_PAIRS int64   [B,M]          the colour+shape of each (index into grammar.PAIRS),
                                    likewise
The data module's tensors add one more, per step, to look up each step's tokens and chunk:
    EPISODE      int64   [N]        the episode of each step
"""

IMAGE = "image"
STATE = "state"
TOKENS = "tokens"
ACTION = "action"
TARGET = "target"
OBJECTS = "objects"
OBJECT_PAIRS = "object_pairs"
INSTRUCTION = "instruction"  # raw text, in env observations
ACTION_IS_PAD = "action_is_pad"  # bool [B,K]: chunk steps past the episode's end
EPISODE = "episode"  # int64 [N]: the episode of each step (data module tensors, not batches)
