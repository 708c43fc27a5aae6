"""Batch keys shared by the data pipeline, the policy and the rollouts.

A training batch is a dict with these keys:
    IMAGE        uint8   [B,H,W,3]  the env's observation image, unnormalised
    STATE        float32 [B,S]      effector position and velocity (S = 4)
    TOKENS       int64   [B,L]      instruction token ids, PAD-padded to the tokenizer's max_len
    ACTION       float32 [B,A]      the expert's (noise-free) action in env units, A = 2
    TARGET       float32 [B,2]      where the named target is, arena units in [0,1]^2:
                                    privileged, used only by the optional auxiliary loss
"""

IMAGE = "image"
STATE = "state"
TOKENS = "tokens"
ACTION = "action"
TARGET = "target"
INSTRUCTION = "instruction"  # raw text, in env observations
