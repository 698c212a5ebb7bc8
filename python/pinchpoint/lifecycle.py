"""Objects that a `with` block holds for its length: `Closing` ones are closed at its end,
`Started` ones started at its start and stopped at its end, however the block ends.

    with TierWriter(path) as writer:      # closed at the end
        ...
    with ResourceSampler(targets) as sampler:   # started, then stopped at the end
        ...
"""

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class _Held(ABC):
    """`with` gives the object itself and calls `leave` at the end of the block.

    A context manager by its methods, not by `contextlib.AbstractContextManager`: typing
    that base fixes what `with` gives to one class, where `Self` gives each its own (what
    `ExitStack.enter_context` returns, too)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.leave(exc)

    @abstractmethod
    def leave(self, error: BaseException | None) -> None:
        """Called at the end of the `with` block; `error` is what ended it early, if any
        (it is raised on after this returns)."""


class Closing(_Held):
    """Closed at the end of a `with` block."""

    @abstractmethod
    def close(self) -> None: ...

    def leave(self, error: BaseException | None) -> None:
        self.close()


class Started(_Held):
    """Started at the start of a `with` block and stopped at its end."""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    def __enter__(self) -> Self:
        self.start()
        return self

    def leave(self, error: BaseException | None) -> None:
        self.stop()
