"""oasr's exceptions: every error the engine raises is an ``oasr.Error``.

The subclass says which input was at fault, and the message is the one the
``oasr`` CLI prints for the same mistake (it names the file, tensor, flag or
key and what to do):

- ``ConfigError`` (also a ``ValueError``): an option or key is wrong, or the
  build / machine cannot serve what the configuration asks for;
- ``CheckpointError``: the checkpoint directory is missing, unreadable or
  damaged;
- ``AudioError``: an audio input is missing, unreadable, damaged or unusable.

``code`` is the engine's error code ("invalid_argument", "not_found",
"corrupt_file", "io_error", "unsupported", "out_of_memory", "internal").
"""


class Error(Exception):
    """Base class of every error oasr raises."""

    code: str = "internal"


class ConfigError(Error, ValueError):
    """A configuration or option the engine refuses."""


class CheckpointError(Error):
    """A checkpoint that cannot be found, read or served."""


class AudioError(Error):
    """An audio input that cannot be read or recognised."""


__all__ = ["Error", "ConfigError", "CheckpointError", "AudioError"]
