"""Shared builders (tests/builders.py) as fixtures for the model tests."""

from __future__ import annotations

import pytest

from tests.builders import build_policy, compose_model, random_batch


@pytest.fixture
def make_policy():
    return build_policy


@pytest.fixture
def make_batch():
    return random_batch


@pytest.fixture
def compose_model_cfg():
    return compose_model
