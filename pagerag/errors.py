"""User-facing errors: the CLI prints `str(error)` as one line and exits non-zero."""


class PageRAGError(Exception):
    """An error caused by the user's input or environment, worth one clear line."""

    exit_code = 2


class InputError(PageRAGError):
    """A source file or path that cannot be used."""


class RepositoryError(PageRAGError):
    """A repository that is missing, half-written, from a future version, or not writable."""


class ConfigError(PageRAGError):
    """A bad setting, preset name or configuration file."""


class BackendError(PageRAGError):
    """An LLM backend that is down, slow, or answered with something unusable."""

    exit_code = 3
