"""The descriptors that make a `Call` builder of `_generated.py` a method of both clients.

On `RewardsClient` a method returns the result, on `AsyncRewardsClient` an awaitable; `Pages` iterates a
cursor-paginated list. The builder's parameters and docstring are the method's (`help()`, `inspect.signature`;
mypy and IDEs read them through the ParamSpec)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

from rewards_lab.client._core import Call, Page

if TYPE_CHECKING:
    from rewards_lab.client._clients import AsyncRewardsClient, RewardsClient

P = ParamSpec("P")
T = TypeVar("T")


def _signature(build: Callable[..., Any], returns: Callable[[str], str]) -> inspect.Signature:
    """The builder's signature, answering what the method returns (`Call[X]` becomes `returns("X")`)."""
    signature = inspect.signature(build)
    annotation = str(signature.return_annotation)
    inner = annotation.removeprefix("Call[").removesuffix("]") if annotation.startswith("Call[") else annotation
    return signature.replace(return_annotation=returns(inner))


class Operation(Generic[P, T]):
    """`client.create_customer(...)`: builds the Call and sends it with the client's retry loop. On the class,
    the builder itself (`help(RewardsClient)` lists every method with its parameters)."""

    def __init__(self, build: Callable[P, Call[T]]) -> None:
        self.build = build
        self._signatures: dict[bool, inspect.Signature] = {}

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Callable[P, Call[T]]: ...

    @overload
    def __get__(self, client: RewardsClient, owner: type[Any]) -> Callable[P, T]: ...

    @overload
    def __get__(self, client: AsyncRewardsClient, owner: type[Any]) -> Callable[P, Awaitable[T]]: ...

    def __get__(self, client: Any, owner: type[Any]) -> Any:
        if client is None:
            return self.build
        build = self.build

        def method(*args: P.args, **kwargs: P.kwargs) -> Any:
            return client.call(build(*args, **kwargs))

        return _described(method, build, self._signature(inspect.iscoroutinefunction(client.call)))

    def _signature(self, awaited: bool) -> inspect.Signature:
        if awaited not in self._signatures:
            self._signatures[awaited] = _signature(self.build, (lambda t: f"Awaitable[{t}]") if awaited else str)
        return self._signatures[awaited]


class Pages(Generic[P, T]):
    """`client.iter_events(...)`: every item of a cursor-paginated list, page after page."""

    def __init__(self, build: Callable[P, Call[Page[T]]]) -> None:
        self.build = build
        self._signatures: dict[bool, inspect.Signature] = {}

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Callable[P, Call[Page[T]]]: ...

    @overload
    def __get__(self, client: RewardsClient, owner: type[Any]) -> Callable[P, Iterator[T]]: ...

    @overload
    def __get__(self, client: AsyncRewardsClient, owner: type[Any]) -> Callable[P, AsyncIterator[T]]: ...

    def __get__(self, client: Any, owner: type[Any]) -> Any:
        if client is None:
            return self.build
        build = self.build

        def method(*args: P.args, **kwargs: P.kwargs) -> Any:
            return client.iterate(build(*args, **kwargs))

        awaited = inspect.iscoroutinefunction(client.call)
        if awaited not in self._signatures:
            iterator = "AsyncIterator" if awaited else "Iterator"

            def items(page: str) -> str:
                return f"{iterator}[{page.removeprefix('Page[').removesuffix(']')}]"

            self._signatures[awaited] = _signature(build, items)
        method = _described(method, build, self._signatures[awaited])
        method.__doc__ = f"Every item `{build.__name__}` lists, page after page.\n\n{build.__doc__ or ''}"
        return method


def _described(method: Callable[..., Any], build: Callable[..., Any], signature: inspect.Signature) -> Any:
    functools.update_wrapper(method, build)
    del method.__wrapped__  # type: ignore[attr-defined]  # the signature below, not the builder's, is the method's
    method.__signature__ = signature  # type: ignore[attr-defined]
    return method
