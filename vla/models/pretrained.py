"""What a policy offers a rollout beyond its forward pass."""


class PretrainedMixin:
    def reset(self) -> None:
        """Start of an evaluation: a sampling head restarts its noise stream."""
        self.head.reset()
