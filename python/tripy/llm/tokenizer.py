"""Text to token ids and back, the first and last step of generation: a reader of Hugging Face
``tokenizer.json`` files of the byte-level BPE family (GPT-2, Llama 3, Qwen2, Mistral-Nemo)."""

import codecs
import heapq
import json
import os
import re
import unicodedata

from tripy.frontend.errors import _raise_here

try:  # Optional: only pre-tokenizer patterns with \p{L}-style classes need it (Debian: python3-regex).
    import regex as _regex
except ImportError:
    _regex = None

# GPT-2's split, used by a ByteLevel pre-tokenizer with ``use_regex``: contractions, letters, digits,
# other symbols (each with at most one leading space), then whitespace, leaving one space to the next word.
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

_SPLIT_BEHAVIORS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")
_BPE_CACHE_SIZE = 1 << 16


def _byte_chars():
    """The 256 characters that stand for the bytes 0..255 in byte-level vocabularies: printable
    Latin-1 bytes stand for themselves, the others (controls, space, soft hyphen...) take the code
    points from U+0100 on, in byte order, so that no token contains whitespace or a control."""
    printable = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    chars, moved = [], 0
    for byte in range(256):
        if byte in printable:
            chars.append(chr(byte))
        else:
            chars.append(chr(0x100 + moved))
            moved += 1
    return chars


BYTE_CHARS = _byte_chars()
_BYTE_TO_CHAR = dict(enumerate(BYTE_CHARS))  # a str.translate table over text decoded as Latin-1
_CHAR_TO_BYTE = {c: b for b, c in enumerate(BYTE_CHARS)}


def _fail(source, message):
    _raise_here(f"{source}: {message}")


def _compile(pattern, source, what):
    """A Split pattern: ``{"String": literal}`` or ``{"Regex": pattern}`` (Oniguruma syntax, which the
    ``regex`` module reads; Python's ``re`` serves only where it compiles the pattern unchanged)."""
    if isinstance(pattern, dict) and isinstance(pattern.get("String"), str):
        return re.compile(re.escape(pattern["String"]))
    text = pattern.get("Regex") if isinstance(pattern, dict) else pattern
    if not isinstance(text, str):
        _fail(source, f"{what} has no pattern (expected {{'String': ...}} or {{'Regex': ...}}), got: {pattern!r}")
    try:
        return _regex.compile(text) if _regex else re.compile(text)
    except Exception as err:  # failing outside the handler keeps the error's traceback short
        error = err
    if _regex is None:
        _fail(source, f"{what} pattern {text!r} needs the 'regex' module (Debian package python3-regex)")
    _fail(source, f"{what} pattern {text!r} does not compile: {error}")


def _split(text, pattern, behavior, invert=False):
    """``text`` cut at the matches of ``pattern``; ``behavior`` says what becomes of the matches
    (``invert`` makes the parts between matches the delimiters instead)."""
    parts, pos = [], 0  # (piece, is_delimiter), covering the whole text
    for m in pattern.finditer(text):
        if m.start() == m.end():
            continue
        if m.start() > pos:
            parts.append((text[pos : m.start()], invert))
        parts.append((m.group(), not invert))
        pos = m.end()
    if pos < len(text):
        parts.append((text[pos:], invert))
    if behavior == "Removed":
        return [piece for piece, is_delimiter in parts if not is_delimiter]
    if behavior == "Isolated":
        return [piece for piece, _ in parts]
    return _merge_delimiters(parts, behavior)


def _merge_delimiters(parts, behavior):
    """Merged*: a delimiter joins its neighbour piece unless that one is a delimiter too;
    Contiguous: delimiters join only each other."""
    backward = behavior == "MergedWithNext"  # the mirror image of MergedWithPrevious
    out, previous = [], False
    for piece, is_delimiter in reversed(parts) if backward else parts:
        if out and is_delimiter and (previous if behavior == "Contiguous" else not previous):
            out[-1] = piece + out[-1] if backward else out[-1] + piece
        else:
            out.append(piece)
        previous = is_delimiter
    return out[::-1] if backward else out


def _pre_tokenizer_steps(spec, source):
    """The pre-tokenizer as a list of steps, each mapping one piece of text to a list of pieces."""
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind == "Sequence":
        return [step for inner in spec.get("pretokenizers", []) for step in _pre_tokenizer_steps(inner, source)]
    if kind == "Split":
        behavior = spec.get("behavior", "Isolated")
        if behavior not in _SPLIT_BEHAVIORS:
            _fail(source, f"unsupported Split behavior {behavior!r} (supported: {', '.join(_SPLIT_BEHAVIORS)})")
        pattern, invert = _compile(spec.get("pattern"), source, "the Split pre-tokenizer's"), bool(spec.get("invert"))
        return [lambda piece: _split(piece, pattern, behavior, invert)]
    if kind == "ByteLevel":
        prefix_space = spec.get("add_prefix_space", True)
        pattern = _compile({"Regex": GPT2_PATTERN}, source, "ByteLevel's") if spec.get("use_regex", True) else None

        def byte_level(piece):
            # A leading space makes a text's first word tokenize like the words after it.
            if prefix_space and not piece.startswith(" "):
                piece = " " + piece
            pieces = _split(piece, pattern, "Isolated") if pattern else [piece]
            return [p.encode("utf-8").decode("latin-1").translate(_BYTE_TO_CHAR) for p in pieces]

        byte_level.is_byte_level = True
        return [byte_level]
    _fail(source, f"unsupported pre-tokenizer {kind!r} (supported: ByteLevel, Split, Sequence of these)")


def _post_processor(spec, source):
    """The ids that encode(add_special_tokens=True) puts (before, after) a text's own ids."""
    kind = spec.get("type") if spec else None
    if kind is None or kind == "ByteLevel":  # ByteLevel only trims offsets, which we do not report
        return [], []
    if kind == "Sequence":  # each processor wraps the output of the ones before it
        before, after = [], []
        for inner in spec.get("processors", []):
            outer_before, outer_after = _post_processor(inner, source)
            before, after = outer_before + before, after + outer_after
        return before, after
    if kind in ("RobertaProcessing", "BertProcessing"):
        return [spec["cls"][1]], [spec["sep"][1]]
    if kind == "TemplateProcessing":
        before, after, specials = [], None, spec.get("special_tokens", {})
        for item in spec.get("single", []):
            if "Sequence" in item:
                after = []
            elif "SpecialToken" in item:
                name = item["SpecialToken"]["id"]
                if name not in specials:
                    _fail(source, f"the TemplateProcessing post-processor names an undefined special token {name!r}")
                (before if after is None else after).extend(specials[name]["ids"])
        return before, after or []
    _fail(source, f"unsupported post-processor {kind!r} (supported: TemplateProcessing, ByteLevel, Roberta/Bert, none)")


def _read_json(path, required=True):
    if not required and not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as err:  # failing outside the handler keeps the error's traceback short
        problem = f"cannot read the file: {err.strerror or err}"
    except ValueError as err:
        problem = f"not a valid JSON file: {err}"
    _fail(path, problem)


class _AddedToken:
    def __init__(self, spec):
        self.content, self.id = spec.get("content"), spec.get("id")
        self.special = bool(spec.get("special", False))
        self.lstrip, self.rstrip = bool(spec.get("lstrip")), bool(spec.get("rstrip"))
        self.single_word = bool(spec.get("single_word"))
        self.normalized = bool(spec.get("normalized", not self.special))


class Tokenizer:
    """
    A byte-level BPE tokenizer read from a Hugging Face ``tokenizer.json``. Text is cut into added
    (special) tokens, then normalized, pre-tokenized, mapped byte by byte to characters and merged
    by BPE rank. Construct it with :meth:`from_file` or :meth:`from_dict`.

    Attributes:
        bos_token_id: the beginning-of-text id (tokenizer_config.json's ``bos_token``, else the
            token the post-processor puts first), or None.
        eos_token_ids: the set of ids that end generation (tokenizer_config.json's ``eos_token`` and
            generation_config.json's ``eos_token_id``); empty when neither file says.
        vocab_size: one more than the highest id, added tokens included.

    Example::

        from tripy.llm.tokenizer import Tokenizer

        tok = Tokenizer.from_dict({
            "model": {"type": "BPE", "vocab": {"h": 0, "i": 1, "Ġ": 2, "hi": 3}, "merges": ["h i"]},
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False},
            "added_tokens": [{"id": 4, "content": "<s>", "special": True}],
            "post_processor": {"type": "TemplateProcessing", "single": [
                {"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "special_tokens": {"<s>": {"id": "<s>", "ids": [4], "tokens": ["<s>"]}}},
        })
        assert tok.encode("hi hi") == [4, 3, 2, 3] and tok.bos_token_id == 4
        assert tok.decode([4, 3, 2, 3], skip_special_tokens=True) == "hi hi"
    """

    def __init__(self, obj, tokenizer_config=None, generation_config=None, source="<tokenizer dict>"):
        """Use :meth:`from_file` or :meth:`from_dict`."""
        if not isinstance(obj, dict) or not isinstance(obj.get("model"), dict):
            _fail(source, "not a tokenizer.json: it has no 'model' object")
        model, config = obj["model"], tokenizer_config or {}
        kind = model.get("type", "BPE" if "merges" in model else None)
        if kind != "BPE":
            _fail(source, f"unsupported tokenizer model {kind!r} (only byte-level BPE is supported)")
        for key in ("continuing_subword_prefix", "end_of_word_suffix", "dropout"):
            if model.get(key):
                _fail(source, f"unsupported BPE option {key}={model[key]!r}")
        self._load_vocab(model, obj.get("added_tokens") or [], source)

        normalizer = obj.get("normalizer") or {}
        parts = normalizer.get("normalizers", []) if normalizer.get("type") == "Sequence" else [normalizer]
        if any(part and part.get("type") != "NFC" for part in parts):
            _fail(source, f"unsupported normalizer {normalizer!r} (supported: none, NFC)")
        self._nfc = any(parts)

        self._pre_steps = _pre_tokenizer_steps(obj.get("pre_tokenizer") or {"type": "Sequence"}, source)
        if sum(getattr(step, "is_byte_level", False) for step in self._pre_steps) != 1:
            _fail(source, "a byte-level BPE needs exactly one ByteLevel pre-tokenizer")
        decoder = (obj.get("decoder") or {}).get("type")
        if decoder not in (None, "ByteLevel"):
            _fail(source, f"unsupported decoder {decoder!r} (supported: ByteLevel)")

        bos, eos = (self._name_id(config, key, source) for key in ("bos_token", "eos_token"))
        before, self._after = _post_processor(obj.get("post_processor"), source)
        # Without a configured BOS, the post-processor's leading token is the BOS.
        self.bos_token_id = bos if bos is not None or not before else before[0]
        # tokenizer_config.json's add_bos_token overrides whether the post-processor's BOS is there.
        add_bos = config.get("add_bos_token")
        if add_bos is not None and self.bos_token_id is not None:
            has_bos = before[:1] == [self.bos_token_id]
            if add_bos and not has_bos:
                before = [self.bos_token_id] + before
            elif not add_bos and has_bos:
                before = before[1:]
        self._before = before

        generation_eos = (generation_config or {}).get("eos_token_id")
        eos_ids = generation_eos if isinstance(generation_eos, list) else [generation_eos]
        self.eos_token_ids = {int(i) for i in eos_ids + [eos] if i is not None}

    @classmethod
    def from_file(cls, path):
        """
        Reads ``path``: a ``tokenizer.json`` or a checkpoint directory holding one. A
        ``tokenizer_config.json`` beside it gives the BOS/EOS token names and ``add_bos_token``; a
        ``generation_config.json`` beside it adds its ``eos_token_id`` (an int or a list).
        """
        path = os.fspath(path)
        file = os.path.join(path, "tokenizer.json") if os.path.isdir(path) else path
        directory = os.path.dirname(file)
        config = _read_json(os.path.join(directory, "tokenizer_config.json"), required=False)
        generation = _read_json(os.path.join(directory, "generation_config.json"), required=False)
        return cls(_read_json(file), config, generation, source=file)

    @classmethod
    def from_dict(cls, obj, tokenizer_config=None, generation_config=None):
        """A tokenizer from the parsed contents of a ``tokenizer.json`` (and optionally of its
        ``tokenizer_config.json`` and ``generation_config.json``)."""
        return cls(obj, tokenizer_config, generation_config)

    def _load_vocab(self, model, added_tokens, source):
        vocab = model.get("vocab")
        if not isinstance(vocab, dict) or not vocab:
            _fail(source, "the BPE model has no 'vocab' object")
        self._vocab, self._tokens = {}, {}  # the BPE model's token -> id; id -> token, added tokens included
        for token, i in vocab.items():
            if not isinstance(i, int) or i < 0:
                _fail(source, f"vocabulary token {token!r} has an invalid id {i!r}")
            if i in self._tokens:
                _fail(source, f"tokens {self._tokens[i]!r} and {token!r} share the id {i}")
            self._vocab[token], self._tokens[i] = i, token

        self._merges = {}  # (left id, right id) -> (rank, merged id)
        for rank, merge in enumerate(model.get("merges") or []):
            pair = merge.split(" ") if isinstance(merge, str) else merge
            if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not all(isinstance(p, str) for p in pair):
                _fail(source, f"merge {rank} is malformed (expected 'a b' or [a, b]): {merge!r}")
            for token in (*pair, pair[0] + pair[1]):
                if token not in self._vocab:
                    _fail(source, f"merge {rank} ({pair[0]!r} {pair[1]!r}) needs {token!r}, not in the vocabulary")
            left, right, merged = (self._vocab[t] for t in (*pair, pair[0] + pair[1]))
            self._merges.setdefault((left, right), (rank, merged))
        self._ignore_merges = bool(model.get("ignore_merges"))
        self._unk_id = self._vocab.get(model.get("unk_token")) if model.get("unk_token") else None
        self._cache = {}

        self._added, self._special_ids = {}, set()  # content -> _AddedToken; ids decode skips
        for spec in added_tokens:
            token = _AddedToken(spec if isinstance(spec, dict) else {})
            if not isinstance(token.content, str) or not token.content or not isinstance(token.id, int) or token.id < 0:
                _fail(source, f"malformed added token: {spec!r}")
            # The same token may be in the vocabulary too (GPT-2's <|endoftext|>), but with the same id.
            if self._tokens.get(token.id, token.content) != token.content:
                _fail(source, f"added token {token.content!r} and {self._tokens[token.id]!r} share the id {token.id}")
            known = self._added[token.content].id if token.content in self._added else self._vocab.get(token.content)
            if known not in (None, token.id):
                _fail(source, f"added token {token.content!r} has two ids: {token.id}, {known}")
            self._added[token.content], self._tokens[token.id] = token, token.content
            if token.special:
                self._special_ids.add(token.id)
        added = self._added.values()
        self._raw_matcher = self._added_matcher([t for t in added if not t.normalized])
        self._normalized_matcher = self._added_matcher([t for t in added if t.normalized])
        self.vocab_size = max(self._tokens) + 1
        self._bytes = {}  # id -> its bytes, filled as decode meets them

    def _name_id(self, config, key, source):
        """The id of the token that tokenizer_config.json names at ``key`` (a string or an AddedToken)."""
        name = config.get(key)
        name = name.get("content") if isinstance(name, dict) else name
        if name is None:
            return None
        if self.token_to_id(name) is None:
            _fail(source, f"tokenizer_config.json's {key} {name!r} is not a token of the vocabulary")
        return self.token_to_id(name)

    @staticmethod
    def _added_matcher(tokens):
        # Longest first: of the tokens that start at the same place, the longest one wins.
        alternatives = []
        for token in sorted(tokens, key=lambda t: -len(t.content)):
            literal = re.escape(token.content)
            alternatives.append(rf"(?<!\w){literal}(?!\w)" if token.single_word else literal)
        return re.compile("|".join(alternatives)) if alternatives else None

    def _split_added(self, text, matcher):
        """``text`` as (text, None) and (stripped whitespace, added token id) pieces."""
        pieces, start = [], 0
        while matcher is not None and (m := matcher.search(text, start)):
            token, (begin, end) = self._added[m.group()], m.span()
            while token.lstrip and begin > start and text[begin - 1].isspace():
                begin -= 1
            while token.rstrip and end < len(text) and text[end].isspace():
                end += 1
            if begin > start:
                pieces.append((text[start:begin], None))
            pieces.append(("", token.id))
            start = end
        if start < len(text):
            pieces.append((text[start:], None))
        return pieces

    def encode(self, text, add_special_tokens=True):
        """
        The token ids of ``text``. Added tokens written in it (``<|eot_id|>``...) map to their ids
        whatever ``add_special_tokens`` says; ``add_special_tokens`` adds what the post-processor
        adds (Llama 3: ``<|begin_of_text|>`` first).
        """
        if not isinstance(text, str):
            _raise_here(f"Tokenizer.encode expects a str, but got: {type(text).__name__}.")
        ids = []
        for raw, added_id in self._split_added(text, self._raw_matcher):
            if added_id is not None:
                ids.append(added_id)
                continue
            normalized = unicodedata.normalize("NFC", raw) if self._nfc else raw
            for piece, added_id in self._split_added(normalized, self._normalized_matcher):
                if added_id is not None:
                    ids.append(added_id)
                    continue
                words = [piece]
                for step in self._pre_steps:
                    words = [w for word in words for w in step(word) if w]
                for word in words:
                    ids.extend(self._bpe(word))
        return self._before + ids + self._after if add_special_tokens else ids

    def _bpe(self, word):
        ids = self._cache.get(word)
        if ids is None:
            if self._ignore_merges and word in self._vocab:  # Llama 3: a whole-word token wins over merges
                ids = [self._vocab[word]]
            else:
                ids = self._merge([self._char_id(c) for c in word])
            if len(self._cache) >= _BPE_CACHE_SIZE:
                self._cache.clear()
            self._cache[word] = ids
        return ids

    def _char_id(self, char):
        if char in self._vocab:
            return self._vocab[char]
        if self._unk_id is None:
            _raise_here(f"The tokenizer's vocabulary has no token for byte 0x{_CHAR_TO_BYTE.get(char, 0):02x} "
                        f"({char!r}) and no unk_token.")
        return self._unk_id

    def _merge(self, symbols):
        """Merges the adjacent pair of lowest rank (the leftmost of equals) until no pair has a rank.
        A heap of candidate pairs over a linked list keeps long words (whitespace runs) O(n log n)."""
        n, merges, heap = len(symbols), self._merges, []
        following = list(range(1, n + 1))  # the next live symbol; n past the end
        preceding = list(range(-1, n - 1))

        def push(i):
            j = following[i]
            found = merges.get((symbols[i], symbols[j])) if j < n else None
            if found:
                heapq.heappush(heap, (found[0], i, symbols[i], symbols[j]))

        for i in range(n - 1):
            push(i)
        while heap:
            _, i, left, right = heapq.heappop(heap)
            j = following[i]
            # Stale entries (a neighbour has merged since) no longer match the symbols.
            if symbols[i] != left or j >= n or symbols[j] != right:
                continue
            symbols[i], symbols[j] = merges[left, right][1], None
            following[i] = following[j]
            if following[j] < n:
                preceding[following[j]] = i
            if preceding[i] >= 0:
                push(preceding[i])
            push(i)
        return [s for s in symbols if s is not None]

    def _token_bytes(self, token_id, skip_special_tokens):
        if skip_special_tokens and token_id in self._special_ids:
            return b""
        data = self._bytes.get(token_id)
        if data is None:
            token = self._tokens.get(token_id)
            if token is None:
                _raise_here(f"Token id {token_id!r} is not in the tokenizer's vocabulary of {self.vocab_size} ids.")
            if token in self._added or any(c not in _CHAR_TO_BYTE for c in token):
                data = token.encode("utf-8")  # added tokens are plain text, not byte characters
            else:
                data = bytes(_CHAR_TO_BYTE[c] for c in token)
            self._bytes[token_id] = data
        return data

    def decode(self, ids, skip_special_tokens=False):
        """The text of ``ids``; bytes that are not valid UTF-8 become U+FFFD."""
        return b"".join(self._token_bytes(int(i), skip_special_tokens) for i in ids).decode("utf-8", "replace")

    def stream(self, skip_special_tokens=False):
        """A :class:`TokenStream` that decodes ids one at a time, for printing tokens as they are generated."""
        return TokenStream(self, skip_special_tokens)

    def token_to_id(self, token):
        """The id of a token (in its vocabulary spelling, e.g. ``"Ġthe"``), or None."""
        added = self._added.get(token)
        return added.id if added else self._vocab.get(token)

    def id_to_token(self, token_id):
        """The vocabulary spelling of ``token_id``, or None."""
        return self._tokens.get(token_id)


class TokenStream:
    """Decodes token ids as they arrive; see :meth:`Tokenizer.stream`."""

    def __init__(self, tokenizer, skip_special_tokens=False):
        self._tokenizer, self._skip = tokenizer, skip_special_tokens
        # Holds back the bytes of a character split across tokens until its last byte arrives.
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")

    def push(self, token_id):
        """The text completed by ``token_id``: all of it that is whole characters, maybe ``""``."""
        return self._utf8.decode(self._tokenizer._token_bytes(int(token_id), self._skip))

    def finish(self):
        """The text still held back at the end (an incomplete character becomes U+FFFD)."""
        return self._utf8.decode(b"", final=True)
