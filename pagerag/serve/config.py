"""What a server serves and how: repositories, address, API key, build root, limits.

The defaults are the safe ones: bound to 127.0.0.1; any other address needs an API key; builds
from server paths only under a configured root; uploads of .txt/.md only, up to a size; and the
LLM backends are the operator's: the one chosen at start (`--llm`, resolved once, `auto`
included), those allowed with `--allow-llm`, and `extractive` (no LLM, nothing leaves the
machine). A request may pick among those and nothing else, so it cannot make the server call an
endpoint, or spend a key from its environment, that the operator did not choose.
"""
from __future__ import annotations

import ipaddress
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError

LLM_CHOICES = ("auto", "openai", "llamacpp", "extractive")
BACKENDS = ("openai", "llamacpp", "extractive")
EXTRACTIVE = "extractive"
REPO_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
MIN_KEY_CHARS = 12
MB = 1024 * 1024


@dataclass
class ServeConfig:
    repos: dict[str, Path]  # name -> published repository directory
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None  # bearer token; required when not bound to a loopback address
    build_root: Path | None = None  # POST /v1/builds {"path"} must lie under it; None = path builds off
    repos_dir: Path | None = None  # where repositories built under a new name go
    allow_builds: bool = True
    max_builds: int = 3  # build jobs queued or running at once; one more is a 429 (--max-builds)
    allow_remove: bool = False  # DELETE /v1/repos/{name} may remove a repository a build job made (--allow-remove)
    pipeline: str | None = None  # default pipeline preset for questions and builds
    llm: str | None = None  # default LLM backend
    allow_llms: list[str] = field(default_factory=list)  # more backends a request may choose (--allow-llm)
    config_file: Path | None = None
    sets: list[str] = field(default_factory=list)  # --set section.field=value overrides
    workers: int = 1  # questions answered at once (threads); the rest wait their turn (see --workers)
    max_upload_bytes: int = 20 * MB
    max_body_bytes: int = 1 * MB  # JSON bodies
    warm: bool = True  # answer a warm-up question when a version is opened
    _settings: dict[tuple, Any] = field(default_factory=dict, repr=False)
    _offered: tuple[str, ...] = field(default=(), repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def check(self) -> "ServeConfig":
        """Refuse an unsafe or impossible configuration before anything is loaded."""
        if not self.repos:
            raise ConfigError("give at least one repository: --repo DIR")
        if not is_loopback(self.host) and not self.api_key:
            raise ConfigError(f"binding to {self.host} exposes the server beyond this machine: give an API key "
                              "(--api-key KEY or PAGERAG_API_KEY), or bind to 127.0.0.1")
        if self.api_key is not None and len(self.api_key) < MIN_KEY_CHARS:
            raise ConfigError(f"the API key is too short ({len(self.api_key)} characters; at least {MIN_KEY_CHARS})")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port must be 0-65535, got {self.port}")
        if self.workers < 1:
            raise ConfigError(f"--workers must be at least 1, got {self.workers}")
        if self.max_builds < 1:
            raise ConfigError(f"--max-builds must be at least 1, got {self.max_builds}")
        if self.llm is not None and self.llm not in LLM_CHOICES:
            raise ConfigError(f"unknown --llm '{self.llm}' (choose {', '.join(LLM_CHOICES)})")
        for name in self.allow_llms:
            if name not in BACKENDS:
                raise ConfigError(f"unknown --allow-llm '{name}' (choose {', '.join(BACKENDS)})")
        if self.build_root is not None:
            if not self.build_root.is_dir():
                raise ConfigError(f"--build-root {self.build_root}: not a directory")
            self.build_root = self.build_root.resolve()
        default = backend_of(self._load(self.pipeline, self.llm))  # a bad preset, config file or --set fails here
        self._offered = tuple(dict.fromkeys([default, *self.allow_llms, EXTRACTIVE]))
        self.settings()
        return self

    @property
    def offered_llms(self) -> tuple[str, ...]:
        """The backends questions may use, the default first (known once `check` has run)."""
        return self._offered

    @property
    def default_llm(self) -> str:
        return self._offered[0] if self._offered else EXTRACTIVE

    @property
    def loopback_only(self) -> bool:
        return is_loopback(self.host)

    @property
    def new_repos_dir(self) -> Path:
        if self.repos_dir is not None:
            return self.repos_dir
        first = next(iter(self.repos.values()), None)
        return first.resolve().parent if first is not None else Path.cwd()

    def settings(self, pipeline: str | None = None, llm: str | None = None):
        """Effective settings for a request (cached): the server's flags, then the request's
        pipeline and LLM backend — one the operator offers (`auto` = the server's default)."""
        if llm is not None and llm not in LLM_CHOICES:
            raise ConfigError(f"unknown llm '{llm}' (choose {', '.join(LLM_CHOICES)})")
        backend = self.default_llm if llm in (None, "auto") else llm
        self._check_offered(backend)
        key = (pipeline or self.pipeline, backend)
        with self._lock:
            if key not in self._settings:
                if key[0] is not None:
                    _check_pipeline(key[0])
                settings = self._load(key[0], backend)
                self._check_offered(backend_of(settings))  # a preset cannot switch the backend either
                self._settings[key] = settings
            return self._settings[key]

    def _load(self, pipeline: str | None, llm: str | None):
        from ..settings import load_settings

        return load_settings(pipeline, self.config_file, sets=list(self.sets), llm=llm)

    def _check_offered(self, backend: str) -> None:
        if self._offered and backend not in self._offered:
            raise ConfigError(f"llm '{backend}' is not offered by this server (offered: {', '.join(self._offered)}); "
                              "the operator chooses the backends (--llm, --allow-llm)")

    @property
    def max_question_chars(self) -> int:
        return int(self.settings().retrieve.max_question_chars)


def backend_of(settings) -> str:
    """The backend these settings run (`auto` resolved as `get_llm` would, from the environment)."""
    from ..llm import describe_choice

    return describe_choice(settings.llm)[0]


def _check_pipeline(name: str) -> None:
    from ..settings import available_pipelines

    known = available_pipelines()
    if name not in known:
        raise ConfigError(f"unknown pipeline '{name}' (choose {', '.join(known)})")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def parse_repos(values: list[str]) -> dict[str, Path]:
    """`--repo DIR` or `--repo NAME=DIR`; the name defaults to the directory name without `.rag`."""
    repos: dict[str, Path] = {}
    for value in values:
        name, _, path = value.partition("=") if "=" in value and not Path(value).exists() else ("", "", value)
        path_obj = Path(path)
        name = name or repo_name(path_obj)
        if not REPO_NAME.match(name):
            raise ConfigError(f"--repo {value}: '{name}' is not a usable name (letters, digits, - and _; "
                              "give NAME=DIR)")
        if name in repos:
            raise ConfigError(f"two repositories are named '{name}': give one as NAME=DIR")
        repos[name] = path_obj
    return repos


def repo_name(path: Path) -> str:
    name = path.resolve().name if path.name in ("", ".", "..") else path.name
    return name[:-4] if name.endswith(".rag") and len(name) > 4 else name
