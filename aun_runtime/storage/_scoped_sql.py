"""Statements of tables that carry an owner's column on one database and not on another.

Apart from the dialects because each of them hands one out (`Dialect.scoped`) and the stores use it
alike: it is the spelling of the owner's column, not a database.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["ScopedSQL"]


class ScopedSQL:
    """Statements of tables that, in one of the databases, carry one more key column first.

    A shared PostgreSQL database holds what one SQLite file holds for one owner (a worker's journal,
    one service's ledger), so there its tables start with the owner's column; in SQLite they do not.
    A statement is written once with `{cols}`, `{vals}` and `{where}` where that column goes.

    Args:
        column: the owner's column (`worker`, `aid`), or None where the tables have none.
        value: the owner.

    Example:
        >>> ScopedSQL("aid", "svc.local").sql("SELECT seq FROM t WHERE {where}seq > ?")
        'SELECT seq FROM t WHERE aid = ? AND seq > ?'
        >>> ScopedSQL(None, "svc.local").sql("INSERT INTO t ({cols}seq) VALUES ({vals}?)")
        'INSERT INTO t (seq) VALUES (?)'
    """

    def __init__(self, column: str | None, value: str) -> None:
        self.column = column
        self.cols = f"{column}, " if column else ""
        self.vals = "?, " if column else ""
        self.where = f"{column} = ? AND " if column else ""
        self.args: tuple[str, ...] = (value,) if column else ()

    def sql(self, template: str) -> str:
        return template.format(cols=self.cols, vals=self.vals, where=self.where)

    def rows(self, rows: Iterable[Sequence[object]]) -> list[tuple[object, ...]]:
        """Argument rows with the owner first (where the tables have its column)."""
        return [(*self.args, *row) for row in rows]
