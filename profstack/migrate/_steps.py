"""Where a converted profiler's `step()` goes, so every converted script records a bounded window.

torch.profiler's schedule (wait/warmup/active, repeat) counts `step()` calls; without them a started
profile records everything until `stop()`. SageMaker Profiler recorded a bounded window by itself, so
the codemod must place a step wherever the training step repeats. In order of preference:

1. the training loop that runs after `start()`: in the same block, in a block after the `if` holding
   the start (`if args.profile: P.start()`), inside an `if`/`try`/`with` that follows (two nested loops
   under `if args.profile:`, a try/finally around the loop), or inside a function or method of this
   module called after the start (`self.train_epoch()` whose loop calls `self.train_step`), or after
   the call of the function that starts it (`begin()` then the loop); of nested loops, the deepest
   that calls backward()/step() (the batch loop, not the epoch loop);
2. a callback's step-end hook (Hugging Face `TrainerCallback.on_step_end`, Lightning
   `Callback.on_train_batch_end`) of the class whose hook starts the profile;
3. the one function of the module that does a training step (calls backward(), or is named
   `train_step`/`training_step`): one step() per call;
4. the calls between start() and stop(): one step() after each, with a schedule that records the first.

A start under `if args.profile:` gets its step under the same condition (torch's schedule starts
tracing on step() by itself). A loop the profiler object cannot be seen from (a local passed nowhere),
or a conditional start whose step would land in another function, is a refusal with the change to
make, never an unbounded recording. The placement itself lives in `smprof._Analysis`; this module
holds the syntax-tree questions it asks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

STEP_END_HOOKS = ("on_step_end", "on_train_batch_end")  # Hugging Face TrainerCallback, Lightning Callback
WORK_FUNCTIONS = frozenset({"train_step", "training_step"})
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_LOOPS = (cst.For, cst.While)


def children_in_scope(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Pre-order descendants of ``node`` (itself first) that run when it runs: not into defs, classes, lambdas."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if current is not node and isinstance(current, _SCOPES):
            continue
        stack.extend(reversed([c for c in current.children if not isinstance(c, _SCOPES)]))


def first_loop(node: cst.CSTNode) -> cst.For | cst.While | None:
    return next((n for n in children_in_scope(node) if isinstance(n, _LOOPS)), None)


def calls_step(node: cst.CSTNode) -> bool:
    """Calls backward() or an optimizer-like step() (the marks of a training step)."""
    return any(
        isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in {"backward", "step"}
        for n in children_in_scope(node)
    )


def innermost_training_loop(loop: cst.CSTNode) -> cst.CSTNode:
    """Of a loop and the loops inside it, the deepest that calls backward() or step(): the step loop."""
    best, best_depth = loop, -1
    stack: list[tuple[cst.CSTNode, int]] = [(loop, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, _SCOPES) and node is not loop:
            continue
        if isinstance(node, _LOOPS) and depth > best_depth and calls_step(node):
            best, best_depth = node, depth
        inner = depth + 1 if isinstance(node, _LOOPS) else depth
        stack.extend((child, inner) for child in node.children)
    return best


def calls_in(node: cst.CSTNode) -> list[cst.Call]:
    return [n for n in children_in_scope(node) if isinstance(n, cst.Call)]


def own_returns(function: cst.FunctionDef) -> list[cst.Return]:
    return [n for n in children_in_scope(function.body) if isinstance(n, cst.Return)]


def params(function: cst.FunctionDef) -> list[str]:
    p = function.params
    return [x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)]


def binds_locally(function: cst.FunctionDef, name: str) -> bool:
    """``name`` is a parameter or assigned in ``function`` (without `global`): a different object there."""
    if name in params(function):
        return True
    declared_global = any(
        isinstance(n, cst.Global) and any(g.name.value == name for g in n.names) for n in children_in_scope(function)
    )
    if declared_global:
        return False
    for n in children_in_scope(function.body):
        targets: list[cst.BaseExpression] = []
        if isinstance(n, cst.Assign):
            targets = [t.target for t in n.targets]
        elif isinstance(n, cst.AnnAssign | cst.AugAssign | cst.For):
            targets = [n.target]
        if any(isinstance(t, cst.Name) and t.value == name for t in targets):
            return True
    return False


def is_method(function: cst.FunctionDef, parent: Callable[[cst.CSTNode], cst.CSTNode | None]) -> cst.ClassDef | None:
    """The class ``function`` is a method of (first parameter `self`), or None."""
    block = parent(function)
    owner = parent(block) if block is not None else None
    if isinstance(owner, cst.ClassDef) and params(function)[:1] == ["self"]:
        return owner
    return None


def methods(klass: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    body = klass.body.body if isinstance(klass.body, cst.IndentedBlock) else []
    return {s.name.value: s for s in body if isinstance(s, cst.FunctionDef)}
