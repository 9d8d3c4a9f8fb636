"""LibCST helpers shared by the script and launcher codemods: findings, statement-list edits.

Statement-level changes (remove a statement, replace it by several, wrap a run of statements in a
`with` block, put a compound statement's kept branch in its place) are planned against the original
nodes and applied where the statement list is rebuilt (`leave_IndentedBlock`, `leave_Module`), so the
original and updated lists stay aligned. Comments of removed statements move to the next statement
(or the block's footer), never lost.

Every plan is keyed by the node itself, never by `id(node)`: LibCST nodes hash and compare by
identity, so a node key is exact, and the plan holds its nodes alive. An `id()` outlives its object:
once a node is freed (an updated node a transformer dropped, a temporary) a new node can get the same
id, and an edit planned for the one lands on the other (a user's `if __name__ == "__main__":` block
replaced by the body of an `if smprof:` guard).
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Union, cast

import libcst as cst

Statement = Union[cst.SimpleStatementLine, cst.BaseCompoundStatement]  # noqa: UP007 - a runtime alias
MARKER = "profstack-migrate"
#: the comment a notebook's joined cells start with (profstack.migrate.notebook): code above it would move cells
CELL_MARKER = "# profstack-cell-"


@dataclass(frozen=True, order=True)
class Finding:
    line: int
    message: str


@dataclass
class StatementPlan:
    """What happens to statements of the original tree, keyed by the nodes themselves (identity)."""

    remove: dict[cst.CSTNode, str | None] = field(default_factory=dict)  # stmt -> comment to leave, or None
    replace: dict[cst.CSTNode, list[str]] = field(default_factory=dict)  # stmt -> new statements (source)
    wrap: dict[cst.CSTNode, tuple[cst.CSTNode, str]] = field(default_factory=dict)  # begin -> (end, with-item code)
    append: dict[cst.CSTNode, list[str]] = field(default_factory=dict)  # compound -> statements appended to its body
    insert_after: dict[cst.CSTNode, list[str]] = field(default_factory=dict)  # stmt -> statements after it
    insert_before: dict[cst.CSTNode, list[str]] = field(default_factory=dict)  # stmt -> statements before it
    # filled while transforming: compound -> the (updated) statements that stand in its place (a kept branch)
    inline: dict[cst.CSTNode, list[cst.BaseStatement]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        edits = (self.remove, self.replace, self.wrap, self.append, self.insert_after, self.insert_before, self.inline)
        return any(bool(e) for e in edits)

    def touches(self, stmt: cst.CSTNode) -> bool:
        edits = (self.remove, self.replace, self.wrap, self.append, self.insert_after, self.insert_before, self.inline)
        return any(stmt in planned for planned in edits)


def comment_line(text: str) -> cst.EmptyLine:
    return cst.EmptyLine(comment=cst.Comment(f"# {MARKER}: {text}"))


def parse_statements(sources: Sequence[str]) -> list[Statement]:
    out: list[Statement] = []
    for source in sources:
        module = cst.parse_module(source)
        body = list(module.body)
        if body and module.header:  # leading blank lines/comments parse as the module header
            body[0] = body[0].with_changes(leading_lines=[*module.header, *body[0].leading_lines])
        out.extend(body)
    return out


def _leading(stmt: Statement) -> Sequence[cst.EmptyLine]:
    return stmt.leading_lines


def _with_leading(stmt: Statement, lines: Sequence[cst.EmptyLine]) -> Statement:
    return stmt.with_changes(leading_lines=[*lines, *stmt.leading_lines])


def inner_comments(stmt: cst.CSTNode) -> list[cst.EmptyLine]:
    """The comments inside a compound statement (not its own leading lines), as lines to keep."""
    if not isinstance(stmt, cst.BaseCompoundStatement):
        return []
    own = set(stmt.leading_lines)
    out: list[cst.EmptyLine] = []
    stack: list[cst.CSTNode] = [c for c in stmt.children if c not in own]
    while stack:
        node = stack.pop(0)
        if isinstance(node, cst.Comment):
            out.append(cst.EmptyLine(comment=node))
            continue
        stack[0:0] = list(node.children)
    return out


def _trailing_comment(stmt: Statement) -> cst.Comment | None:
    if isinstance(stmt, cst.SimpleStatementLine):
        return stmt.trailing_whitespace.comment
    return None


def rebuild_body(
    original: Sequence[cst.BaseStatement],
    updated: Sequence[cst.BaseStatement],
    plan: StatementPlan,
) -> tuple[list[cst.BaseStatement], list[cst.EmptyLine]]:
    """The new statement list and any comment lines left over at its end (for the footer)."""
    pending: list[cst.EmptyLine] = []  # comments of removed statements, waiting for the next statement
    out: list[cst.BaseStatement] = []
    index = 0
    while index < len(original):
        orig, upd = original[index], cast(Statement, updated[index])
        key = orig
        if key in plan.insert_before:
            before = parse_statements(plan.insert_before[key])
            if pending and before:
                before[0] = _with_leading(before[0], pending)
                pending = []
            out.extend(before)
        if key in plan.wrap:
            end_key, item_code = plan.wrap[key]
            end_index = next(i for i in range(index + 1, len(original)) if original[i] is end_key)
            inner_orig = list(original[index + 1 : end_index])
            inner_upd = list(updated[index + 1 : end_index])
            inner, leftover = rebuild_body(inner_orig, inner_upd, plan)
            end_stmt = cast(Statement, updated[end_index])
            footer = [*leftover, *end_stmt.leading_lines]
            if _trailing_comment(end_stmt) is not None:
                footer.append(cst.EmptyLine(comment=_trailing_comment(end_stmt)))
            if not inner:
                inner = [cst.SimpleStatementLine(body=[cst.Pass()])]
            header_comment = _trailing_comment(upd)
            with_node = cst.With(
                items=[cst.WithItem(item=cst.parse_expression(item_code))],
                body=cst.IndentedBlock(
                    body=inner,
                    header=cst.TrailingWhitespace(
                        whitespace=cst.SimpleWhitespace("  " if header_comment else ""), comment=header_comment
                    ),
                    footer=footer,
                ),
                leading_lines=[*pending, *upd.leading_lines],
            )
            pending = []
            out.append(with_node)
            out.extend(parse_statements(plan.insert_after.get(end_key, [])))  # after the block the end closes
            index = end_index + 1
            continue
        if key in plan.remove:
            pending.extend(upd.leading_lines)
            pending.extend(inner_comments(upd))
            comment = _trailing_comment(upd)
            if comment is not None:
                pending.append(cst.EmptyLine(comment=comment))
            note = plan.remove[key]
            if note:
                pending.append(comment_line(note))
            index += 1
            continue
        if key in plan.replace:
            new = parse_statements(plan.replace[key])
            first_leading = [*pending, *upd.leading_lines, *inner_comments(upd)]
            pending = []
            comment = _trailing_comment(upd)
            if comment is not None and isinstance(new[0], cst.SimpleStatementLine):
                new[0] = new[0].with_changes(
                    trailing_whitespace=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=comment)
                )
            new[0] = _with_leading(new[0], first_leading)
            out.extend(new)
        else:
            kept, pending = _kept(orig, upd, plan, pending)
            out.extend(kept)
        if key in plan.insert_after:
            out.extend(parse_statements(plan.insert_after[key]))
        index += 1
    return out, pending


def _kept(
    orig: cst.BaseStatement, upd: Statement, plan: StatementPlan, pending: list[cst.EmptyLine]
) -> tuple[list[Statement], list[cst.EmptyLine]]:
    """A statement that stays (its body perhaps appended to), or the statements its plan inlines in its
    place (a guard's kept branch; none: its comments wait for the next statement); and what still waits."""
    if orig in plan.append and isinstance(upd, cst.BaseCompoundStatement):
        upd = _append_to_body(upd, parse_statements(plan.append[orig]))
    if orig not in plan.inline:
        return [_with_leading(upd, pending) if pending else upd], []
    kept = [cast(Statement, s) for s in plan.inline[orig]]
    waiting = [*pending, *upd.leading_lines]
    if not kept:
        return [], waiting
    return [_with_leading(kept[0], waiting), *kept[1:]], []


def _append_to_body(stmt: cst.BaseCompoundStatement, extra: list[Statement]) -> cst.BaseCompoundStatement:
    body = stmt.body
    if isinstance(body, cst.IndentedBlock):
        return stmt.with_changes(body=body.with_changes(body=[*body.body, *extra]))
    # `for x in y: a()` on one line: the new statements go on lines of their own.
    assert isinstance(body, cst.SimpleStatementSuite)
    first = cst.SimpleStatementLine(body=body.body, trailing_whitespace=body.trailing_whitespace)
    return stmt.with_changes(body=cst.IndentedBlock(body=[first, *extra]))


class PlannedTransformer(cst.CSTTransformer):
    """Applies a StatementPlan's statement-list edits; subclasses add expression-level edits."""

    def __init__(self, plan: StatementPlan) -> None:
        super().__init__()
        self.plan = plan

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        if not self._touches(original_node.body):
            return updated_node
        body, leftover = rebuild_body(original_node.body, updated_node.body, self.plan)
        if not body:
            body = [cst.SimpleStatementLine(body=[cst.Pass()], leading_lines=leftover)]
            leftover = []
        return updated_node.with_changes(body=body, footer=[*leftover, *updated_node.footer])

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if not self._touches(original_node.body):
            return updated_node
        body, leftover = rebuild_body(original_node.body, updated_node.body, self.plan)
        return updated_node.with_changes(body=body, footer=[*leftover, *updated_node.footer])

    def _touches(self, body: Sequence[cst.BaseStatement]) -> bool:
        return any(self.plan.touches(s) for s in body)


def parse_quietly(source: str, filename: str = "<unknown>") -> ast.Module:
    """ast.parse of a user's file without the warnings its code draws (`"\\s"` in a plain string is a
    SyntaxWarning since 3.12): they are the user's to fix, not the codemod's to print."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(source, filename=filename)


def dotted(node: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr.value}" if inner else None
    return None


def import_module_name(node: cst.ImportFrom) -> str:
    if node.module is None:
        return ""
    return dotted(node.module) or ""
