"""Training: the Lightning module (behavior cloning recipe), schedule and callbacks."""
