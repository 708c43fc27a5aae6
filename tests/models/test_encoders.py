import pytest
import torch

from vla.errors import ConfigError
from vla.models.language import TextEncoder, Tokenizer, masked_mean
from vla.models.state import StateEncoder
from vla.models.transformer import PositionEmbedding, Readout, sinusoidal_1d
from vla.models.vision import FiLM, ImageEncoder, normalize_pixels


def test_sinusoidal_positions():
    table = sinusoidal_1d(10, 8)
    torch.testing.assert_close(table[0], torch.tensor([0.0] * 4 + [1.0] * 4))
    torch.testing.assert_close(table[3, 0], torch.tensor(3.0).sin())  # fastest frequency is 1
    pos = PositionEmbedding((3, 4), 16, kind="sinusoidal")
    assert "table" not in pos.state_dict()  # fixed, so not saved
    grid = pos.table.reshape(3, 4, 16)
    # first half of the channels encodes the row, second half the column
    assert torch.equal(grid[1, 0, :8], grid[1, 3, :8]) and not torch.equal(
        grid[0, 0, :8], grid[1, 0, :8]
    )
    assert torch.equal(grid[0, 2, 8:], grid[2, 2, 8:]) and not torch.equal(
        grid[0, 0, 8:], grid[0, 1, 8:]
    )
    with pytest.raises(ConfigError, match="dim % 4 == 0, got dim=18"):
        PositionEmbedding((2, 2), 18, kind="sinusoidal")


def test_learned_positions_are_parameters_and_none_adds_nothing():
    learned = PositionEmbedding((5,), 8, kind="learned")
    assert isinstance(learned.table, torch.nn.Parameter) and learned.table.shape == (5, 8)
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(learned(x), x + learned.table[:3])
    assert torch.equal(PositionEmbedding((5,), 8, kind="none")(x), x)
    with pytest.raises(ValueError, match="6 tokens exceeds the 5 positions"):
        learned(torch.randn(1, 6, 8))
    with pytest.raises(ConfigError, match="unknown pos_emb 'rope'"):
        PositionEmbedding((5,), 8, kind="rope")


def test_image_encoder_shapes_and_normalisation():
    enc = ImageEncoder(image_size=32, patch_size=8, d_model=24, coord_features=False)
    image = torch.randint(0, 256, (2, 32, 32, 3), dtype=torch.uint8)
    assert enc(image).shape == (2, 16, 24) and enc.num_patches == 16
    pixels = torch.tensor([0, 51, 255], dtype=torch.uint8)
    torch.testing.assert_close(normalize_pixels(pixels), torch.tensor([-1.0, -0.6, 1.0]))
    # patch 1 is the second patch of the first row: pixels [0:8, 8:16]
    patches = enc.patchify(image.float())
    assert torch.equal(patches[0, 1].reshape(8, 8, 3), image[0, 0:8, 8:16].float())


def test_coordinate_features_tell_identical_patches_apart():
    image = torch.full((1, 32, 32, 3), 128, dtype=torch.uint8)  # the same content everywhere
    plain = ImageEncoder(32, 8, 24, coord_features=False, pos_emb="none")(image)
    coords = ImageEncoder(32, 8, 24, coord_features=True, pos_emb="none")
    assert coords.patch_embed.in_features == 8 * 8 * 3  # coordinates have their own projection
    assert torch.allclose(plain, plain[:, :1].expand_as(plain))  # 16 identical tokens
    out = coords(image)
    assert torch.cdist(out[0], out[0]).fill_diagonal_(1.0).min() > 1e-3  # 16 distinct tokens
    first = coords.coord_patches[0, 0].reshape(8, 8, 2)  # the top-left patch's coordinates
    assert first[0, 0].tolist() == pytest.approx([-31 / 32, -31 / 32])  # x, y in (-1,1)


def test_modulation_touches_content_but_not_positions():
    image = torch.randint(0, 256, (2, 32, 32, 3), dtype=torch.uint8)
    enc = ImageEncoder(32, 8, 24, coord_features=True, pos_emb="learned")
    film = FiLM(24)
    torch.nn.init.constant_(film.to_gamma_beta.bias[:24], -1.0)  # gamma = -1: content * 0
    zeroed = enc(image, film, torch.zeros(2, 24))  # all content removed
    positions = enc.pos(enc.coord_embed(enc.coord_patches).expand(2, -1, -1))
    assert torch.allclose(zeroed, positions)
    assert not torch.allclose(enc(image), zeroed)


def test_image_encoder_validation():
    with pytest.raises(ConfigError, match="image_size=60 is not divisible by patch_size=8"):
        ImageEncoder(image_size=60, patch_size=8, d_model=32)
    enc = ImageEncoder(32, 8, 32)
    with pytest.raises(ValueError, match=r"does not match \[B,32,32,3\]"):
        enc(torch.zeros(1, 3, 32, 32, dtype=torch.uint8))  # channels-first by mistake


def test_text_encoder_mask_and_default_vocab():
    tok = Tokenizer(max_len=6)
    enc = TextEncoder(d_model=16, max_len=6)
    assert enc.vocab_size == tok.vocab_size
    words, pad = enc(tok.encode(["reach the red circle", "go to the blue square"]))
    assert words.shape == (2, 5, 16)  # the longest instruction's words
    assert pad.tolist() == [[False] * 4 + [True], [False] * 5]


def test_state_encoder_is_one_token():
    assert StateEncoder(4, 16)(torch.randn(3, 4)).shape == (3, 1, 16)
    assert StateEncoder(4, 16, hidden_dim=32)(torch.randn(3, 4)).shape == (3, 1, 16)
    with pytest.raises(ValueError, match="state has 5 dims, expected state_dim=4"):
        StateEncoder(4, 16)(torch.randn(3, 5))


def test_film_starts_as_identity_and_the_pooled_instruction_ignores_padding():
    torch.manual_seed(0)
    film = FiLM(16)
    patches, words = torch.randn(2, 9, 16), torch.randn(2, 5, 16)
    pad = torch.tensor([[False, False, False, True, True]] * 2)
    cond = masked_mean(words, pad)  # [B,D]
    torch.testing.assert_close(cond, words[:, :3].mean(1))
    assert torch.equal(film(patches, cond), patches)
    torch.nn.init.normal_(film.to_gamma_beta.weight)
    out = film(patches, cond)
    gamma, beta = film.to_gamma_beta(cond).chunk(2, dim=-1)  # [B,D] each
    torch.testing.assert_close(out, patches * (1 + gamma[:, None]) + beta[:, None])
    junk = words.clone()
    junk[:, 3:] = 100.0  # what sits in PAD positions must not matter
    torch.testing.assert_close(film(patches, masked_mean(junk, pad)), out)


@pytest.mark.parametrize("mode", ["self", "cross"])
def test_readout_shapes(mode):
    readout = Readout(d_model=16, n_heads=4, num_readouts=3, mode=mode)
    tokens = torch.randn(2, 10, 16)
    out = readout(tokens)
    assert out.shape == (2, 3, 16)
    if mode == "self":
        assert torch.equal(out, tokens[:, -3:])
    else:
        _, weights = readout(tokens, need_weights=True)
        assert weights.shape == (2, 4, 3, 10)
    with pytest.raises(ConfigError, match="unknown readout 'both'"):
        Readout(16, mode="both")


def test_blocks_over_the_words_make_the_pooled_instruction_depend_on_their_order():
    torch.manual_seed(0)
    tok = Tokenizer()
    ids = tok.encode(["reach the red circle then the blue square"] * 2)
    swapped = tok.encode(["reach the blue square then the red circle"])
    for depth, order_matters in ((0, False), (1, True)):
        enc = TextEncoder(d_model=16, depth=depth)  # learned positions: order is there
        pooled = [masked_mean(*enc(t)) for t in (ids[:1], swapped)]  # [1,D] each
        assert torch.allclose(*pooled, atol=1e-6) != order_matters


def test_referent_positions_count_within_each_referent():
    torch.manual_seed(0)
    tok = Tokenizer()
    ids = tok.encode(["reach the red circle then the blue square then the green star"])
    then = tok.word_to_id["then"]
    enc = TextEncoder(16, referent_positions=True, referent_jitter=3, then_id=then).eval()
    number = torch.tensor([0] * 4 + [1] * 4 + [2] * 4)  # "then" opens a referent
    within = torch.tensor([0, 1, 2, 3] * 3)  # the position inside it
    expected = enc.referent_embed.weight[number] + enc.pos.table[within]  # [12,D]
    torch.testing.assert_close(enc.referent_codes(ids)[0], expected)
    # a three-step chain meets no position a two-step one lacks; only referent 2 is new
    two = enc.referent_codes(tok.encode(["reach the red circle then the blue square"]))
    torch.testing.assert_close(two[0], expected[:8])
    # training shifts every referent number of an instruction by one offset in 0..jitter
    enc.train()
    shifts = set()
    for _ in range(40):
        codes = enc.referent_codes(ids)[0] - enc.pos.table[within]  # [12,D]
        shift = (codes[:, None] - enc.referent_embed.weight[None]).abs().sum(-1).argmin(-1) - number
        assert len(set(shift.tolist())) == 1
        shifts.add(int(shift[0]))
    assert shifts == {0, 1, 2, 3}
    with pytest.raises(ConfigError, match="referent_jitter=-1"):
        TextEncoder(d_model=16, referent_positions=True, referent_jitter=-1, then_id=then)
    with pytest.raises(ConfigError, match="has no 'then'"):
        TextEncoder(d_model=16, referent_positions=True)


def test_referents_open_at_the_tokenizers_own_then(make_policy):
    """A custom vocabulary moves "then": the policy hands the text encoder its id."""
    from vla.models.language import default_vocabulary

    vocab = default_vocabulary()
    vocab.remove("then")
    vocab.insert(2, "then")  # a vocabulary of the same words, "then" at id 2
    words = ",".join(repr(w) for w in vocab)
    policy = make_policy(
        "tiny", "model.text_encoder.referent_positions=true", f"model.tokenizer.vocab=[{words}]"
    )
    enc = policy.text_encoder.eval()
    ids = policy.tokenizer.encode(["reach the red circle then the blue square"])
    assert ids[0, 4] == 2
    number = torch.tensor([0] * 4 + [1] * 4)  # "then" opens referent 1
    within = torch.tensor([0, 1, 2, 3] * 2)
    expected = enc.referent_embed.weight[number] + enc.pos.table[within]
    torch.testing.assert_close(enc.referent_codes(ids)[0], expected)
