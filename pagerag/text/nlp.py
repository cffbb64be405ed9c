"""spaCy pipelines, loaded once per process (the one place spaCy is loaded); and, for a cold
one-shot command, a question parser in a forked process (`start_parser_process`)."""
from __future__ import annotations

import os
import pickle
import sys
import threading
from concurrent.futures import Future
from typing import Any

from ..errors import ConfigError


_LOADS: dict[tuple[str, tuple[str, ...]], Future] = {}
_LOADS_LOCK = threading.Lock()


def load_spacy(model: str, disable: tuple[str, ...] = ("lemmatizer",)) -> Any:
    """The spaCy pipeline `model` without the `disable`d components, loaded once per process
    (a load that `prefetch_spacy` started is waited for, not repeated); a clear ConfigError when
    the model package is not installed."""
    future, mine = _claim(model, disable)
    if mine:
        _load_into(future, model, disable)
    return future.result()


def prefetch_spacy(model: str, disable: tuple[str, ...] = ("lemmatizer",)) -> None:
    """Start loading `model` in a background thread (seconds of a cold `ask`: spaCy's import and
    the model's weights), so it overlaps opening the repository and retrieving. Only call it when
    nothing else in the process may import torch meanwhile (see _import_spacy)."""
    future, mine = _claim(model, disable)
    if mine:
        # not a daemon: an exit waits for the load rather than leaving during its native code
        threading.Thread(target=_load_into, args=(future, model, disable), name="spacy-load").start()


def _claim(model: str, disable: tuple[str, ...]) -> tuple[Future, bool]:
    """The future of this load, and whether the caller must run it (nobody started it yet)."""
    with _LOADS_LOCK:
        key = (model, tuple(disable))
        if key in _LOADS:
            return _LOADS[key], False
        _LOADS[key] = Future()
        return _LOADS[key], True


def _load_into(future: Future, model: str, disable: tuple[str, ...]) -> None:
    try:
        spacy = _import_spacy(without_torch=not model.endswith("_trf"))
        try:
            future.set_result(spacy.load(model, disable=list(disable)))
        except OSError:
            raise ConfigError(f"spaCy model '{model}' is not installed (pip install {model.replace('_', '-')})") from None
    except BaseException as exc:  # handed to whoever waits for the pipeline; a later call tries again
        with _LOADS_LOCK:
            _LOADS.pop((model, tuple(disable)), None)
        future.set_exception(exc)


def _import_spacy(without_torch: bool):
    """spaCy, imported without letting thinc import torch when torch is not loaded yet: thinc
    imports it whenever it is installed, for pipelines that need it (transformer ones, `_trf`);
    the CNN pipelines do not, and torch's import is seconds of a cold `ask`. Nor its command
    line (see _stand_in_spacy_cli)."""
    if "spacy" in sys.modules:
        import spacy

        return spacy
    block_torch = without_torch and "torch" not in sys.modules
    if block_torch:
        sys.modules["torch"] = None  # type: ignore[assignment]  # `import torch` now raises ImportError
    stand_ins = _stand_in_spacy_cli()
    try:
        import spacy
    finally:
        if block_torch and sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]  # a later import (embed.backend = torch) loads the real one
        _remove_stand_ins(stand_ins)
    return spacy


def _stand_in_spacy_cli() -> dict[str, Any]:
    """spaCy's `__init__` imports its command line (`from .cli.info import info`), and with it
    requests, httpx, typer, weasel and jinja2: ~40% of its import, which no pipeline uses. Empty
    modules stand in for `spacy.cli` and `spacy.cli.info` while spaCy is imported; `spacy.info`
    is then a function that imports the real one when called."""
    import types

    if "spacy.cli" in sys.modules:
        return {}
    cli = types.ModuleType("spacy.cli")
    cli.__path__ = []  # a package: `spacy.cli.info` is then looked up in sys.modules
    info = types.ModuleType("spacy.cli.info")

    def spacy_info(*args, **kwargs):
        from spacy.cli.info import info as real_info

        return real_info(*args, **kwargs)

    info.info = spacy_info
    cli.info = info
    stand_ins = {"spacy.cli": cli, "spacy.cli.info": info}
    sys.modules.update(stand_ins)
    return stand_ins


def _remove_stand_ins(stand_ins: dict[str, Any]) -> None:
    """Take the stand-ins out again: a later `import spacy.cli` imports the real command line."""
    for name, module in stand_ins.items():
        if sys.modules.get(name) is module:
            del sys.modules[name]
    spacy = sys.modules.get("spacy")
    if stand_ins and spacy is not None and getattr(spacy, "cli", None) is stand_ins["spacy.cli"]:
        del spacy.cli


# --------------------------------------------------------------------------------------------
# The question parser of a cold `pagerag ask`, in a process of its own
#
# spaCy's import and its model's load are ~1 s of CPU, nearly all of it Python holding the GIL:
# loaded in a thread (prefetch_spacy) it only takes turns with opening the repository and
# retrieving. Forked before anything else runs, it loads on the machine's other core, and the
# decision's gate (generate.gate) reads the parses it sends back: plain tokens and entities,
# made by the same pipeline with the same calls (`nlp(text)`, `nlp.pipe(texts)`).

# What the gate reads of a parse (confidence.evidence_features): per token, and per entity.
TOKEN_FIELDS = ("text", "lower_", "dep_", "tag_", "pos_", "is_alpha", "is_stop")


class ParsedToken:
    __slots__ = TOKEN_FIELDS

    def __init__(self, values: tuple) -> None:
        for name, value in zip(TOKEN_FIELDS, values):
            setattr(self, name, value)


class ParsedSpan:
    __slots__ = ("text", "label_")

    def __init__(self, text: str, label: str) -> None:
        self.text, self.label_ = text, label


class ParsedDoc:
    """A spaCy Doc as the gate reads it: its text, its tokens (iterable) and its entities."""

    __slots__ = ("text", "tokens", "ents")

    def __init__(self, flat: tuple) -> None:
        text, tokens, ents = flat
        self.text = text
        self.tokens = [ParsedToken(t) for t in tokens]
        self.ents = tuple(ParsedSpan(*e) for e in ents)

    def __iter__(self):
        return iter(self.tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, i):
        return self.tokens[i]


def _flatten(doc) -> tuple:
    return (doc.text, [tuple(getattr(t, name) for name in TOKEN_FIELDS) for t in doc],
            [(e.text, e.label_) for e in doc.ents])


class ParserProcess:
    """spaCy's pipeline `model` loading and then parsing in a forked child process: called like the
    pipeline (`parser(text)`, `parser.pipe(texts)`), it returns ParsedDocs. Any failure of the
    child (the model not installed, the process gone) falls back to `load_spacy` in this process,
    which gives the same parses or raises the same error."""

    def __init__(self, model: str, disable: tuple[str, ...]):
        self.model, self.disable = model, tuple(disable)
        self._lock = threading.Lock()
        self._fallback = None
        self._ready: bool | None = None
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        parent = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns
            os.close(requests_w)
            os.close(replies_r)
            _serve(model, self.disable, requests_r, replies_w, parent)
        os.close(requests_r)
        os.close(replies_w)
        self._requests = os.fdopen(requests_w, "wb")
        self._replies = os.fdopen(replies_r, "rb")

    def __call__(self, text: str):
        return self._ask("call", [text])[0]

    def pipe(self, texts):
        return iter(self._ask("pipe", list(texts)))

    def _ask(self, kind: str, texts: list[str]) -> list:
        with self._lock:
            if self._fallback is None:
                try:
                    if self._ready is None:
                        self._ready = pickle.load(self._replies) == "ready"
                    if self._ready:
                        pickle.dump((kind, texts), self._requests)
                        self._requests.flush()
                        status, docs = pickle.load(self._replies)
                        if status == "ok":
                            return [ParsedDoc(flat) for flat in docs]
                except (OSError, EOFError, pickle.PickleError):
                    pass
                self.close()
                self._fallback = load_spacy(self.model, self.disable)
        return [self._fallback(texts[0])] if kind == "call" else list(self._fallback.pipe(texts))

    def close(self) -> None:
        """End the child (it exits when its request pipe closes) and reap it."""
        for stream in (self._requests, self._replies):
            try:
                stream.close()
            except OSError:
                pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def _serve(model: str, disable: tuple[str, ...], requests_fd: int, replies_fd: int, parent: int) -> None:
    """The child: load the pipeline, say "ready" (or "failed"), then answer requests until the
    request pipe closes; it leaves with os._exit (none of the parent's exit handlers run). It
    writes to the parent's stdout and stderr as the pipeline would in the parent (spaCy's
    warnings), and it ends with the parent: a caller reading the command's output to its end
    never waits for it."""
    try:
        _end_with_parent(parent)
        with os.fdopen(requests_fd, "rb") as requests, os.fdopen(replies_fd, "wb") as replies:
            try:
                nlp = _import_spacy(without_torch=not model.endswith("_trf")).load(model, disable=list(disable))
            except BaseException:
                pickle.dump("failed", replies)
                return
            pickle.dump("ready", replies)
            replies.flush()
            while True:
                try:
                    kind, texts = pickle.load(requests)
                except EOFError:
                    return
                try:
                    docs = [nlp(texts[0])] if kind == "call" else list(nlp.pipe(texts))
                    reply = ("ok", [_flatten(d) for d in docs])
                except Exception:
                    reply = ("failed", None)
                pickle.dump(reply, replies)
                replies.flush()
    except BaseException:
        pass
    finally:
        os._exit(0)


def _end_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent ends (Linux's PR_SET_PDEATHSIG), even mid-load."""
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # the parent ended before the call above
        os._exit(0)


_PARSERS: dict[tuple[str, tuple[str, ...]], ParserProcess] = {}


def start_parser_process(model: str, disable: tuple[str, ...] = ("lemmatizer",)) -> bool:
    """Fork the question parser of a cold one-shot command (see ParserProcess), when this process
    may fork safely: on Linux, before any other thread is started. False when it was not started
    (the caller may prefetch in a thread instead)."""
    key = (model, tuple(disable))
    if key in _PARSERS:
        return True
    if not sys.platform.startswith("linux") or not hasattr(os, "fork") or threading.active_count() != 1:
        return False
    try:
        _PARSERS[key] = ParserProcess(model, disable)
    except OSError:
        return False
    return True


def question_parser(model: str, disable: tuple[str, ...] = ("lemmatizer",)) -> Any:
    """What parses a question and its evidence: the parser process when one was started for
    `model`, else the spaCy pipeline loaded in this process (load_spacy)."""
    parser = _PARSERS.get((model, tuple(disable)))
    return parser if parser is not None else load_spacy(model, disable)
