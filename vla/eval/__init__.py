"""Evaluation: closed-loop rollouts, modality ablations and rollout videos."""
