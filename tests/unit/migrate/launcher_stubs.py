"""Run a launcher without SageMaker: every module it imports is a recording stub.

`run_launcher(source)` executes the code with `sagemaker`, `boto3` and any other third-party
package replaced by stubs whose calls are recorded as (dotted path, keyword arguments). A class
defined in the launcher that subclasses a stub records under the stub's path. Python itself checks
the calls: a keyword given twice (`f(tags=..., **{"tags": ...})`) raises TypeError as it would at
launch. Only the standard library is real.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

STDLIB = frozenset(sys.stdlib_module_names)


@dataclass
class CallLog:
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def launches(self, *names: str) -> list[tuple[str, dict[str, Any]]]:
        """Calls of the named callables (`PyTorch`, `create_training_job`), by the path's last name."""
        return [(p, kw) for p, kw in self.calls if p.rsplit(".", 1)[-1] in names]


class Stub:
    def __init__(self, path: str, log: CallLog) -> None:
        self._path = path
        self._log = log

    def __getattr__(self, name: str) -> Stub:
        if name.startswith("__"):
            raise AttributeError(name)
        return Stub(f"{self._path}.{name}", self._log)

    def __call__(self, *args: Any, **kwargs: Any) -> Stub:
        self._log.calls.append((self._path, kwargs))
        return Stub(f"{self._path}()", self._log)

    def __mro_entries__(self, bases: Sequence[object]) -> tuple[type, ...]:
        path, log = self._path, self._log

        class Recorded:
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                log.calls.append((path, kwargs))

            def __getattr__(self, name: str) -> Stub:
                return Stub(f"{path}().{name}", log)

        return (Recorded,)

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return self._path

    __repr__ = __str__


class _StubModule(types.ModuleType):
    def __init__(self, name: str, log: CallLog) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        self._log = log

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return Stub(f"{self.__name__}.{name}", self._log)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, log: CallLog) -> None:
        self.log = log

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec:
        del path, target
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _StubModule(spec.name, self.log)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


@contextmanager
def _stubbed(log: CallLog) -> Iterator[None]:
    saved = dict(sys.modules)
    finder = _Finder(log)
    for name in list(sys.modules):
        if name.split(".")[0] not in STDLIB and name.split(".")[0] not in {"__main__"}:
            del sys.modules[name]
    sys.meta_path.insert(0, _StdlibFirst(finder))
    try:
        yield
    finally:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _StdlibFirst)]
        for name in [n for n in sys.modules if n not in saved]:
            del sys.modules[name]  # the stubs
        sys.modules.update(saved)  # the real third-party modules, as they were


class _StdlibFirst(importlib.abc.MetaPathFinder):
    """Third-party and relative names go to the stub finder; the standard library is real."""

    def __init__(self, finder: _Finder) -> None:
        self.finder = finder

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".", maxsplit=1)[0] in STDLIB:
            return None
        return self.finder.find_spec(fullname)


def run_launcher(source: str, *, env: dict[str, str] | None = None) -> CallLog:
    """Execute a launcher's text with stubbed third-party modules; the calls it made."""
    import os

    log = CallLog()
    old_env = dict(os.environ)
    os.environ.update(env or {"PROFSTACK_USER": "alice", "PROFSTACK_TRACE_BUCKET": "traces-1"})
    try:
        with _stubbed(log):
            code = compile(source, "<launcher>", "exec")
            namespace: dict[str, Any] = {"__name__": "launcher_under_test", "__package__": "launchers"}
            exec(code, namespace)
    finally:
        os.environ.clear()
        os.environ.update(old_env)
    return log
