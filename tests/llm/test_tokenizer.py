"""The byte-level BPE tokenizer of tripy.llm against references of its own: a deliberately naive BPE
written here (scan every pair, merge the best one everywhere, repeat), splits of the GPT-2 and
Llama 3 patterns worked out by hand, round trips, streaming, added tokens, BOS/EOS from the config
files, clear errors, and, where the Hugging Face ``tokenizers`` package is importable, that library."""

import collections
import json
import random
import textwrap
import time
import unicodedata

import pytest

import tripy as tp
from tripy.llm import tokenizer as tokenizer_module
from tripy.llm.tokenizer import Tokenizer

needs_regex = pytest.mark.skipif(tokenizer_module._regex is None, reason="the 'regex' module is not installed")

GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"]


# ---- An independent reference: byte characters, a naive trainer and a naive BPE -----------------


def reference_byte_chars():
    # Bytes whose Latin-1 character prints as itself (no controls, spaces or soft hyphen) keep it;
    # the others are numbered from U+0100 upwards in byte order.
    chars, spare = {}, 0x100
    for b in range(256):
        c = chr(b)
        if c.isprintable() and not c.isspace() and b != 0xAD:
            chars[b] = c
        else:
            chars[b], spare = chr(spare), spare + 1
    return chars


BYTE = reference_byte_chars()


def to_byte_text(text):
    return "".join(BYTE[b] for b in text.encode("utf-8"))


def merge_everywhere(parts, a, b):
    out, i = [], 0
    while i < len(parts):
        if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
            out.append(a + b)
            i += 2
        else:
            out.append(parts[i])
            i += 1
    return out


def train_merges(texts, count):
    """Greedy BPE training: merge the most frequent adjacent pair over the words, ``count`` times."""
    words = [list(to_byte_text(" " + w)) for t in texts for w in t.split(" ") if w]
    merges = []
    for _ in range(count):
        pairs = collections.Counter(p for w in words for p in zip(w, w[1:]))
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append((a, b))
        words = [merge_everywhere(w, a, b) for w in words]
    return merges


def reference_bpe(word, merges, vocab, ignore_merges):
    if ignore_merges and word in vocab:
        return [vocab[word]]
    rank = {}
    for r, pair in enumerate(merges):
        rank.setdefault(tuple(pair), r)
    parts = list(word)
    while True:
        ranked = [(rank[p], p) for p in zip(parts, parts[1:]) if p in rank]
        if not ranked:
            return [vocab[p] for p in parts]
        parts = merge_everywhere(parts, *min(ranked)[1])


# ---- Random text -------------------------------------------------------------------------------

WORDS = ["the", "token", "tokenizer", "don't", "we're", "it's", "I'll", "THE", "héllo", "naïve", "straße",
         "日本語", "русский", "مرحبا", "😀", "👍🏽", "e\u0301", "1234567", "3.14", "$x", "...", "--", "\t",
         "\r\n"]
PIECES = WORDS + [" ", "  ", "\n", "\n\n", "   ", ",", "'s", "'t", "'re", "'S", "!?", "½", "\u00a0", "\u3000", "-",
                  "7"]


def random_text(rng, n=12):
    out = []
    for _ in range(rng.randint(1, n)):
        kind = rng.random()
        if kind < 0.75:
            out.append(rng.choice(PIECES))
        elif kind < 0.9:
            out.append(" " + rng.choice(WORDS))
        else:  # any code point but surrogates
            low, high = rng.choice([(0x20, 0x2FF), (0x300, 0xD7FF), (0xE000, 0x10FFFF)])
            out.append(chr(rng.randint(low, high)))
    return "".join(out)


def random_texts(seed, count, n=12):
    rng = random.Random(seed)
    return [random_text(rng, n) for _ in range(count)]


# ---- tokenizer.json fixtures ------------------------------------------------------------------

PRE_TOKENIZERS = {
    # the whole text is one word: the BPE itself decides everything
    "whole": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
    "gpt2": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "splits": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": "-"}, "behavior": "MergedWithNext", "invert": False},
        {"type": "Split", "pattern": {"Regex": r"\d"}, "behavior": "Contiguous", "invert": False},
        {"type": "Split", "pattern": {"Regex": r"\s"}, "behavior": "MergedWithPrevious", "invert": True},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": False}]},
    "removed": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": ","}, "behavior": "Removed", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
    "llama3": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
}


def added(content, i, special=True, **flags):
    spec = dict(id=i, content=content, single_word=False, lstrip=False, rstrip=False, normalized=not special,
                special=special)
    spec.update(flags)
    return spec


def template(before=(), after=()):
    items = [{"SpecialToken": {"id": t, "type_id": 0}} for t in before] + [{"Sequence": {"id": "A", "type_id": 0}}]
    items += [{"SpecialToken": {"id": t, "type_id": 0}} for t in after]
    pair = items + [{"Sequence": {"id": "B", "type_id": 1}}]
    return {"type": "TemplateProcessing", "single": items, "pair": pair, "special_tokens": {}}


def make_fixture(pre="whole", merges=60, as_pairs=False, ignore_merges=False, whole_words=(), nfc=False,
                 added_tokens=(), post=None, seed=0):
    """A tokenizer.json: the 256 byte characters in shuffled ids, trained merges, whole words."""
    rng = random.Random(seed)
    byte_ids = list(range(256))
    rng.shuffle(byte_ids)
    vocab = {BYTE[b]: i for b, i in zip(range(256), byte_ids)}
    merge_list = train_merges(random_texts(seed + 1, 300), merges)
    for a, b in merge_list:
        vocab.setdefault(a + b, len(vocab))
    for word in whole_words:  # whole-word tokens that no merge builds (ignore_merges picks them)
        vocab.setdefault(to_byte_text(word), len(vocab))
    # Added tokens take the ids after the vocabulary, as in real files (Hugging Face renumbers others).
    specs = [dict(added(t, 0) if isinstance(t, str) else t, id=len(vocab) + k) for k, t in enumerate(added_tokens)]
    obj = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": specs,
        "normalizer": {"type": "NFC"} if nfc else None,
        "pre_tokenizer": PRE_TOKENIZERS[pre],
        "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": ignore_merges, "vocab": vocab,
                  "merges": [list(m) for m in merge_list] if as_pairs else [" ".join(m) for m in merge_list]},
    }
    ids = {s["content"]: s["id"] for s in specs}
    for processor in post["processors"] if post and post["type"] == "Sequence" else [post]:
        if processor and processor["type"] == "TemplateProcessing":
            names = {i["SpecialToken"]["id"] for i in processor["single"] if "SpecialToken" in i}
            processor["special_tokens"] = {n: {"id": n, "ids": [ids[n]], "tokens": [n]} for n in sorted(names)}
    return obj


def reference_encode(obj, text):
    """Only for fixtures without added tokens or normalizer: pre-tokenize, then the naive BPE."""
    pre = obj["pre_tokenizer"]
    if pre is PRE_TOKENIZERS["whole"]:
        words = [text]
    elif pre is PRE_TOKENIZERS["gpt2"]:
        words = tokenizer_module._regex.findall(GPT2_PATTERN, text if text.startswith(" ") else " " + text)
    else:
        words = tokenizer_module._regex.findall(LLAMA3_PATTERN, text)
    model = obj["model"]
    merges = [m.split(" ") if isinstance(m, str) else m for m in model["merges"]]
    vocab, ignore_merges = model["vocab"], model["ignore_merges"]
    return [i for w in words if w for i in reference_bpe(to_byte_text(w), merges, vocab, ignore_merges)]


def pieces(tok, text):
    return [bytes(tokenizer_module._CHAR_TO_BYTE[c] for c in tok.id_to_token(i)).decode() for i in tok.encode(text)]


def pieces_tokenizer(pre_tokenizer, expected):
    """Every expected piece is a whole-word token and ignore_merges is on, so that encode shows the
    pre-tokenizer's pieces one id each (a piece it did not produce would come out byte by byte)."""
    vocab = {c: b for b, c in BYTE.items()}
    for piece in {p for ps in expected for p in ps}:
        vocab.setdefault(to_byte_text(piece), len(vocab))
    model = {"type": "BPE", "vocab": vocab, "merges": [], "ignore_merges": True}
    return Tokenizer.from_dict({"model": model, "pre_tokenizer": pre_tokenizer})


# ---- The BPE against the naive reference ------------------------------------------------------


def test_byte_characters_match_the_reference():
    assert tokenizer_module.BYTE_CHARS == [BYTE[b] for b in range(256)]
    assert BYTE[ord(" ")] == "Ġ" and BYTE[ord("\n")] == "Ċ" and BYTE[ord("a")] == "a"


@pytest.mark.parametrize("as_pairs", [False, True])
def test_bpe_matches_the_naive_reference_on_random_text(as_pairs):
    obj = make_fixture("whole", merges=80, as_pairs=as_pairs)
    tok = Tokenizer.from_dict(obj)
    for text in random_texts(2, 400):
        assert tok.encode(text) == reference_encode(obj, text), text


@needs_regex
@pytest.mark.parametrize("pre", ["gpt2", "llama3"])
@pytest.mark.parametrize("ignore_merges", [False, True])
def test_pre_tokenized_bpe_matches_the_naive_reference(pre, ignore_merges):
    obj = make_fixture(pre, merges=120, ignore_merges=ignore_merges, whole_words=[" xylophone", "xylophone", " the"])
    tok = Tokenizer.from_dict(obj)
    for text in random_texts(3, 400) + ["the xylophone xylophone", "xylophone"]:
        assert tok.encode(text) == reference_encode(obj, text), text
    whole = obj["model"]["vocab"][to_byte_text(" xylophone")]
    assert (whole in tok.encode("a xylophone")) == ignore_merges


def test_repeated_pairs_merge_from_the_left():
    vocab = {c: b for b, c in BYTE.items()}
    vocab.update({"aa": 256, "aaaa": 257})
    tok = Tokenizer.from_dict({"model": {"type": "BPE", "vocab": vocab, "merges": ["a a", "aa aa"]},
                               "pre_tokenizer": PRE_TOKENIZERS["whole"]})
    assert tok.encode("aaaaa") == [257, vocab["a"]]
    assert tok.encode("aaa") == [256, vocab["a"]]


# ---- Pre-tokenizer splits worked out by hand ---------------------------------------------------

GPT2_CASES = [
    ("Hello world's 123 tests!!\n\n  ok", ["Hello", " world", "'s", " 123", " tests", "!!", "\n\n ", " ok"]),
    ("I'M  fine\tthanks", ["I", "'", "M", " ", " fine", "\t", "thanks"]),  # case-sensitive contractions
    ("naïve café 3½ 😀😀", ["naïve", " café", " 3½", " 😀😀"]),
    ("a   ", ["a", "   "]),
    ("we're 'tis", ["we", "'re", " '", "tis"]),
]

LLAMA3_CASES = [
    ("I'M 12345 héllo  \n\nWORLD'S", ["I", "'M", " ", "123", "45", " héllo", "  \n\n", "WORLD", "'S"]),
    ("x = 1000000;\r\n  y", ["x", " =", " ", "100", "000", "0", ";\r\n", " ", " y"]),
    ("$hello ...world", ["$hello", " ...", "world"]),
    ("日本語 😀\n", ["日本語", " 😀\n"]),
]


@needs_regex
def test_gpt2_pattern_splits_as_worked_out_by_hand():
    pre = dict(PRE_TOKENIZERS["gpt2"], add_prefix_space=False)
    tok = pieces_tokenizer(pre, [e for _, e in GPT2_CASES])
    for text, expected in GPT2_CASES:
        assert pieces(tok, text) == expected, text


@needs_regex
def test_byte_level_adds_a_prefix_space_per_piece():
    tok = pieces_tokenizer(PRE_TOKENIZERS["gpt2"], [[" Hello", " world", " x"]])
    assert pieces(tok, "Hello world") == [" Hello", " world"]
    assert pieces(tok, " x") == [" x"]


@needs_regex
def test_llama3_pattern_splits_as_worked_out_by_hand():
    tok = pieces_tokenizer(PRE_TOKENIZERS["llama3"], [e for _, e in LLAMA3_CASES])
    for text, expected in LLAMA3_CASES:
        assert pieces(tok, text) == expected, text


@pytest.mark.parametrize(
    "behavior,invert,expected",
    [
        ("Removed", False, ["a", "b", "c"]),
        ("Isolated", False, ["a", "-", "b", "-", "-", "c", "-"]),
        ("MergedWithPrevious", False, ["a-", "b-", "-", "c-"]),
        ("MergedWithNext", False, ["a", "-b", "-", "-c", "-"]),
        ("Contiguous", False, ["a", "-", "b", "--", "c", "-"]),
        ("Removed", True, ["-", "-", "-", "-"]),
        ("MergedWithPrevious", True, ["a", "-b", "-", "-c", "-"]),
    ],
)
def test_split_behaviors(behavior, invert, expected):
    split = {"type": "Split", "pattern": {"String": "-"}, "behavior": behavior, "invert": invert}
    pre = {"type": "Sequence", "pretokenizers": [split, PRE_TOKENIZERS["whole"]]}
    tok = pieces_tokenizer(pre, [expected])
    assert pieces(tok, "a-b--c-") == expected


def test_split_regex_without_unicode_classes_needs_no_regex_module(monkeypatch):
    monkeypatch.setattr(tokenizer_module, "_regex", None)
    split = {"type": "Split", "pattern": {"Regex": r"\s+"}, "behavior": "Removed", "invert": False}
    pre = {"type": "Sequence", "pretokenizers": [split, PRE_TOKENIZERS["whole"]]}
    tok = pieces_tokenizer(pre, [["ab", "c"]])
    assert pieces(tok, "ab \t c") == ["ab", "c"]


# ---- Round trips and streaming ----------------------------------------------------------------


def random_unicode(rng):
    ranges = [(0x20, 0x7E), (0x9, 0xD), (0xA0, 0x24F), (0x370, 0x3FF), (0x4E00, 0x4E80), (0x1F600, 0x1F64F),
              (0x300, 0x36F)]
    return "".join(chr(rng.randint(*rng.choice(ranges))) for _ in range(rng.randint(0, 40)))


@pytest.mark.parametrize("pre", ["whole", "gpt2", "llama3"])
def test_decode_inverts_encode(pre):
    if pre != "whole" and tokenizer_module._regex is None:
        pytest.skip("the 'regex' module is not installed")
    obj = make_fixture(pre, merges=100, added_tokens=SPECIALS, post=template(["<|begin_of_text|>"]))
    tok = Tokenizer.from_dict(obj)
    rng = random.Random(4)
    for text in [random_unicode(rng) for _ in range(300)] + random_texts(5, 100):
        ids = tok.encode(text)
        if pre == "gpt2" and text and not text.startswith(" "):
            text = " " + text  # add_prefix_space
        assert tok.decode(ids, skip_special_tokens=True) == text
        assert tok.decode(ids) == "<|begin_of_text|>" + text


def test_nfc_normalizes_before_tokenizing():
    tok = Tokenizer.from_dict(make_fixture(nfc=True))
    decomposed = "cafe\u0301 \u212b"  # e + combining acute; the Angstrom sign
    assert tok.decode(tok.encode(decomposed)) == unicodedata.normalize("NFC", decomposed) == "café Å"


def test_streaming_decode_matches_decode_and_holds_back_partial_characters():
    tok = Tokenizer.from_dict(make_fixture("whole", merges=0))
    emoji = [tok.token_to_id(BYTE[b]) for b in "😀".encode()]
    stream = tok.stream()
    assert [stream.push(i) for i in emoji] == ["", "", "", "😀"]
    rng = random.Random(6)
    for _ in range(200):  # arbitrary ids: cut characters and invalid UTF-8 included
        ids = [rng.randrange(256) for _ in range(rng.randint(0, 12))]
        stream = tok.stream()
        assert "".join(stream.push(i) for i in ids) + stream.finish() == tok.decode(ids)


def test_invalid_utf8_decodes_to_replacement_characters():
    tok = Tokenizer.from_dict(make_fixture("whole", merges=0))
    first_of_emoji = tok.token_to_id(BYTE["😀".encode()[0]])
    assert tok.decode([first_of_emoji, tok.token_to_id("a")]) == "\ufffda"
    stream = tok.stream()
    assert stream.push(first_of_emoji) == "" and stream.finish() == "\ufffd"


# ---- Added tokens, BOS and EOS ----------------------------------------------------------------


def test_special_tokens_are_split_out_first():
    obj = make_fixture("whole", added_tokens=SPECIALS, post=template(["<|begin_of_text|>"]))
    tok = Tokenizer.from_dict(obj)
    sid = {s: tok.token_to_id(s) for s in SPECIALS}
    plain = lambda text: tok.encode(text, add_special_tokens=False)  # noqa: E731
    text = "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|eot_id|>"
    expected = [sid["<|start_header_id|>"], *plain("user"), sid["<|end_header_id|>"], *plain("\n\nhi")]
    assert tok.encode(text, add_special_tokens=False) == expected + [sid["<|eot_id|>"]] * 2
    assert tok.encode(text) == [sid["<|begin_of_text|>"]] + expected + [sid["<|eot_id|>"]] * 2
    assert tok.decode(tok.encode(text), skip_special_tokens=True) == "user\n\nhi"
    assert sid["<|eot_id|>"] not in plain("<|eot_id") and tok.decode(plain("<|eot_id")) == "<|eot_id"


FLAGGED = [added("<mask>", 0, lstrip=True), added("<R>", 0, rstrip=True), added("<L>", 0, lstrip=True, rstrip=True),
           added("cat", 0, special=False, single_word=True), added("<a>", 0), added("<a>b", 0),
           added("őű", 0, special=False), added("<ő>", 0)]


def test_added_token_flags():
    tok = Tokenizer.from_dict(make_fixture("whole", nfc=True, added_tokens=FLAGGED))
    mask, r, cat, a, ab, ou, o = (tok.token_to_id(t) for t in ("<mask>", "<R>", "cat", "<a>", "<a>b", "őű", "<ő>"))
    plain = lambda text: tok.encode(text, add_special_tokens=False) if text else []  # noqa: E731
    assert tok.encode("a  <mask> b") == plain("a") + [mask] + plain(" b")
    assert tok.encode("a <R>  b") == plain("a ") + [r] + plain("b")
    assert tok.encode("a cat, concat") == plain("a ") + [cat] + plain(", concat")
    assert tok.encode("<a>b<a>") == [ab, a]  # the longest token at a place wins
    # Non-special tokens match the normalized text; special ones (normalized=false) the raw text.
    assert tok.encode("o\u030bu\u030b") == [ou]
    assert o not in tok.encode("<o\u030b>") and tok.encode("<ő>") == [o]
    assert tok.decode([cat, ou, o], skip_special_tokens=True) == "catőű"
    assert tok.encode("cat_s", add_special_tokens=False)[0] != cat  # "_" is part of a word


def test_added_tokens_decode_as_their_text():
    # Hugging Face's ByteLevel decoder reads an added token made only of byte characters as bytes
    # ("<é>" -> "<\xe9>", invalid UTF-8); its text is what the user wrote, so it decodes to that.
    tok = Tokenizer.from_dict(make_fixture("whole", added_tokens=["<é>", "<日本>"]))
    assert tok.decode(tok.encode("a<é>b<日本>")) == "a<é>b<日本>"


@needs_regex
def test_added_tokens_are_not_whole_words_of_the_model():
    # ignore_merges looks words up in the BPE model's vocabulary only: "zq_" splits into "zq" "_",
    # and "zq" is an added token (single_word, so it does not match before "_"), not a model token.
    zq_token = added("zq", 0, special=False, single_word=True)
    tok = Tokenizer.from_dict(make_fixture("llama3", ignore_merges=True, added_tokens=[zq_token]))
    zq = tok.token_to_id("zq")
    assert tok.encode("zq") == [zq] and zq not in tok.encode("zq_")


def test_bos_from_the_post_processor_and_the_configs(tmp_path):
    bos_template = template(["<|begin_of_text|>"], ["<|end_of_text|>"])
    post = {"type": "Sequence", "processors": [{"type": "ByteLevel"}, bos_template]}
    obj = make_fixture("whole", added_tokens=SPECIALS, post=post)
    bos, end, eot = (obj["added_tokens"][k]["id"] for k in (0, 1, 2))
    tok = Tokenizer.from_dict(obj)
    assert tok.encode("hi") == [bos, *tok.encode("hi", add_special_tokens=False), end]
    assert tok.bos_token_id == bos and tok.eos_token_ids == set()
    assert tok.vocab_size == max(s["id"] for s in obj["added_tokens"]) + 1

    no_bos = Tokenizer.from_dict(obj, tokenizer_config={"add_bos_token": False, "bos_token": "<|begin_of_text|>"})
    assert no_bos.encode("hi")[0] != bos and no_bos.bos_token_id == bos
    plain = make_fixture("whole", added_tokens=SPECIALS, post={"type": "ByteLevel"})
    config = {"add_bos_token": True, "bos_token": {"content": "<|begin_of_text|>"}, "eos_token": "<|eot_id|>"}
    with_bos = Tokenizer.from_dict(plain, tokenizer_config=config, generation_config={"eos_token_id": [end, eot]})
    assert with_bos.encode("hi")[0] == bos and with_bos.eos_token_ids == {end, eot}

    (tmp_path / "tokenizer.json").write_text(json.dumps(plain))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": end}))
    for path in (tmp_path, tmp_path / "tokenizer.json", str(tmp_path)):
        from_file = Tokenizer.from_file(path)
        assert from_file.eos_token_ids == {end, eot} and from_file.encode("hi") == with_bos.encode("hi")
    assert Tokenizer.from_dict(plain).bos_token_id is None
    roberta = make_fixture("whole", added_tokens=SPECIALS)
    roberta["post_processor"] = {
        "type": "RobertaProcessing", "cls": ["<|begin_of_text|>", bos], "sep": ["<|eot_id|>", eot]}
    assert Tokenizer.from_dict(roberta).encode("hi") == [bos, *tok.encode("hi", add_special_tokens=False), eot]


def test_token_lookup():
    tok = Tokenizer.from_dict(make_fixture("whole", added_tokens=SPECIALS))
    assert tok.id_to_token(tok.token_to_id("Ġ")) == "Ġ" and tok.token_to_id("<|eot_id|>") is not None
    assert tok.token_to_id("no such token") is None and tok.id_to_token(10**6) is None


def test_docstring_example_runs():
    code = textwrap.dedent(Tokenizer.__doc__.split("Example::")[1])
    exec(compile(code, "<docstring of Tokenizer>", "exec"), {})


def test_encode_is_fast():
    if tokenizer_module._regex is None:
        pytest.skip("the 'regex' module is not installed")
    tok = Tokenizer.from_dict(make_fixture("llama3", merges=300))
    text = "".join(random_texts(7, 2000))[:10_000]
    start = time.perf_counter()
    tok.encode(text)
    tok.encode(" " * 10_000 + "a" * 10_000)  # long words: the heap keeps them O(n log n)
    assert time.perf_counter() - start < 1.0


# ---- Clear errors -----------------------------------------------------------------------------


def edited(change):
    obj = make_fixture("whole", merges=5, added_tokens=SPECIALS)
    change(obj)
    return obj


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda o: o["model"].update(type="WordPiece"), "unsupported tokenizer model 'WordPiece'"),
        (lambda o: o["model"].update(type="Unigram"), "unsupported tokenizer model 'Unigram'"),
        (lambda o: o.update(normalizer={"type": "NFKC"}), "unsupported normalizer"),
        (lambda o: o.update(normalizer={"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}),
         "unsupported normalizer"),
        (lambda o: o.update(pre_tokenizer={"type": "Metaspace"}), "unsupported pre-tokenizer 'Metaspace'"),
        (lambda o: o.update(pre_tokenizer=None), "needs exactly one ByteLevel pre-tokenizer"),
        (lambda o: o.update(pre_tokenizer={"type": "Split", "pattern": {"String": "x"}, "behavior": "Odd"}),
         "unsupported Split behavior 'Odd'"),
        (lambda o: o.update(decoder={"type": "WordPiece"}), "unsupported decoder 'WordPiece'"),
        (lambda o: o.update(post_processor={"type": "Fancy"}), "unsupported post-processor 'Fancy'"),
        (lambda o: o["model"].update(continuing_subword_prefix="##"), "unsupported BPE option continuing_subword"),
        (lambda o: o.pop("model"), "no 'model' object"),
        (lambda o: o["model"].pop("vocab"), "has no 'vocab'"),
        (lambda o: o["model"]["merges"].append("Ġ zzzz"), "'zzzz', not in the vocabulary"),
        (lambda o: o["model"]["merges"].append("a b c"), "is malformed"),
        (lambda o: o["model"]["vocab"].update(extra=0), "share the id 0"),
        (lambda o: o["added_tokens"].append(added("<x>", 0)), "added token '<x>' and"),
        (lambda o: o["added_tokens"].append(added("<|eot_id|>", 9999)), "has two ids"),
    ],
)
def test_unsupported_or_malformed_files_are_named(change, message):
    with pytest.raises(tp.TripyException, match=message) as err:
        Tokenizer.from_dict(edited(change))
    assert "<tokenizer dict>" in str(err.value)


def test_file_errors_name_the_file(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text("{not json")
    with pytest.raises(tp.TripyException, match="not a valid JSON file") as err:
        Tokenizer.from_file(path)
    assert str(path) in str(err.value)
    with pytest.raises(tp.TripyException, match="cannot read the file"):
        Tokenizer.from_file(tmp_path / "missing")
    path.write_text(json.dumps(edited(lambda o: o["model"].update(type="WordPiece"))))
    with pytest.raises(tp.TripyException, match="unsupported tokenizer model 'WordPiece'") as err:
        Tokenizer.from_file(tmp_path)
    assert str(path) in str(err.value)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|nope|>"}))
    path.write_text(json.dumps(edited(lambda o: None)))
    with pytest.raises(tp.TripyException, match="eos_token '<|nope|>' is not a token"):
        Tokenizer.from_file(tmp_path)


def test_missing_regex_module_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(tokenizer_module, "_regex", None)
    with pytest.raises(tp.TripyException, match="needs the 'regex' module .Debian package python3-regex."):
        Tokenizer.from_dict(make_fixture("gpt2"))


def test_unknown_ids_and_bytes_are_errors():
    tok = Tokenizer.from_dict(make_fixture("whole", merges=0))
    with pytest.raises(tp.TripyException, match="Token id 99999 is not in the tokenizer's vocabulary"):
        tok.decode([99999])
    vocab = {"a": 0}
    model = {"type": "BPE", "vocab": vocab, "merges": []}
    tok = Tokenizer.from_dict({"model": model, "pre_tokenizer": PRE_TOKENIZERS["whole"]})
    with pytest.raises(tp.TripyException, match="no token for byte 0x62"):
        tok.encode("ab")
    with_unk = {"model": {"type": "BPE", "vocab": {"a": 0, "<unk>": 1}, "merges": [], "unk_token": "<unk>"},
                "pre_tokenizer": PRE_TOKENIZERS["whole"]}
    assert Tokenizer.from_dict(with_unk).encode("aba") == [0, 1, 0]
    with pytest.raises(tp.TripyException, match="expects a str, but got: bytes"):
        tok.encode(b"ab")


# ---- Against Hugging Face's tokenizers, where it is installed ----------------------------------


def hf_fixtures():
    yield make_fixture("whole", merges=80, added_tokens=SPECIALS, post=template(["<|begin_of_text|>"]))
    yield make_fixture("gpt2", merges=120, as_pairs=True, added_tokens=SPECIALS)
    yield make_fixture("llama3", merges=120, ignore_merges=True, whole_words=[" tokenizer"], nfc=True,
                       added_tokens=SPECIALS + [added("cat", 0, special=False, single_word=True)],
                       post={"type": "Sequence", "processors": [{"type": "ByteLevel", "add_prefix_space": True,
                             "trim_offsets": False, "use_regex": True}, template(["<|begin_of_text|>"])]})
    yield make_fixture("splits", merges=100, nfc=True, added_tokens=FLAGGED, post=template([], ["<R>"]))
    yield make_fixture("removed", merges=100, added_tokens=FLAGGED)


def assert_same_as_hf(hf, tok, texts):
    for text in texts:
        ids = hf.encode(text).ids
        assert tok.encode(text) == ids, text
        assert tok.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False).ids, text
        assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=False), text
        assert tok.decode(ids, skip_special_tokens=True) == hf.decode(ids, skip_special_tokens=True), text


@pytest.mark.parametrize("index", range(5))
def test_fixtures_match_hugging_face_tokenizers(index):
    tokenizers = pytest.importorskip("tokenizers")
    if tokenizer_module._regex is None:
        pytest.skip("the 'regex' module is not installed")
    obj = list(hf_fixtures())[index]
    hf = tokenizers.Tokenizer.from_str(json.dumps(obj))
    rng = random.Random(8)
    texts = random_texts(9, 300) + [random_unicode(rng) for _ in range(100)]
    texts += ["<|begin_of_text|>hi<|eot_id|>", "a cat concat", "the tokenizer", "", "a-b--c-", "x 12-345 -6,7,,"]
    texts += ["a  <mask>  b<R>  c <L> d", "cat_s cat cat1 (cat)", "o\u030bu\u030b <o\u030b> <ő>", " -<R>-"]
    parts = ["<mask>", "<R>", "<L>", " ", "cat", "-", "1", "a", "\n", "őű", "_"]
    texts += ["".join(rng.choice(parts) for _ in range(12)) for _ in range(200)]
    assert_same_as_hf(hf, Tokenizer.from_dict(obj), texts)


@pytest.mark.parametrize("style", ["gpt2", "llama3"])
def test_tokenizers_trained_by_hugging_face_match(style):
    tokenizers = pytest.importorskip("tokenizers")
    if tokenizer_module._regex is None:
        pytest.skip("the 'regex' module is not installed")
    from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers

    hf = tokenizers.Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=style == "gpt2", use_regex=style == "gpt2")
    if style == "llama3":
        split = pre_tokenizers.Split(tokenizers.Regex(LLAMA3_PATTERN), behavior="isolated")
        hf.normalizer, hf.pre_tokenizer = normalizers.NFC(), pre_tokenizers.Sequence([split, byte_level])
    else:
        hf.pre_tokenizer = byte_level
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=SPECIALS[:3], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    hf.train_from_iterator(random_texts(10, 3000, n=30), trainer)
    if style == "llama3":
        bos = hf.token_to_id("<|begin_of_text|>")
        hf.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)])
    tok = Tokenizer.from_dict(json.loads(hf.to_str()))
    assert tok.vocab_size == hf.get_vocab_size()
    assert_same_as_hf(hf, tok, random_texts(11, 300, n=20) + ["<|eot_id|>x<|end_of_text|>"])
