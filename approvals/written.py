"""Statements on the path of every call, written out once per process from the models' fields.

Compiling a queryset costs more CPU than the database spends answering it: a
`select_related` read of a request and what it joins took about 1 ms to build and
0.1 ms to send, and an ORM-built INSERT of an audit row more than its round trip. The
reads and inserts every call makes are therefore statements built once per process and
database engine from the models' own `_meta`, so they follow a migration unedited:

- `JoinedRead`: the bearer token's agent, the request every decision starts with, the
  cards pushed to the open dashboards, and the browsers and topics an ask is pushed to.
  Each value passes through the converters the ORM applies to the column
  (`SQLCompiler.get_converters`, as `RawQuerySet` does), and each row becomes model
  instances through `Model.from_db`: a UUID, a JSON field or a SQLite date comes back
  as the ORM returns it.
- `ModelColumns`: a model's columns in a statement written by hand (the context every
  submit reads, a team's enabled webhooks), read back as `RawQuerySet` reads them.
- `WrittenInsert`: a call's request and its audit row (whose `prev_hash` and `hash` the
  statement computes, approvals.audit). Each value is what the ORM would send
  (`Field.pre_save`, then `get_db_prep_save`), and the instance ends as
  `save(force_insert=True)` leaves it (its id set, no longer adding).
- `run_together`: statements that follow one another, sent in one round trip where the
  database allows, each kept prepared once a connection has sent it a few times (the
  server then skips its parse and plan): the chain's lock, the audit row, its search
  text and the request naming it; an ask's insert and its card; a person's decision's
  request and role; the cards pushed to the dashboards; what the pending cards say
  "since last allowed"; and the reads sent alone (the token's agent, a submit's context).
- `message_transaction`: a transaction that is one `run_together`, its BEGIN and COMMIT
  in the same round trip on PostgreSQL (a call decided at submit, an ask's insert, a
  person's decision).
- `table` and `column`: the quoted names a statement written by hand takes from the
  models (a role, the decision's fence, people's allows, the webhooks, the memberships of
  cards, the browsers to tell that an ask is over).

`tests/approvals/test_written.py` holds the reads and inserts to the ORM, field by field,
on SQLite and PostgreSQL.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, NotSupportedError, connection, connections, transaction
from django.db.models import Field, ForeignKey, Model
from django.db.models.sql import Query
from django.db.transaction import TransactionManagementError

M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class _Part:
    """One model's columns in the row: where they start, and the fields they fill."""

    model: type[Model]
    start: int
    names: list[str]  # the fields' attnames, in column order
    pk_at: int  # where the primary key is among them
    relation: ForeignKey[Any, Any] | None  # the base model's field that joins it; None for the base

    def instance(self, row: Sequence[Any]) -> Model | None:
        values = row[self.start : self.start + len(self.names)]
        if values[self.pk_at] is None:
            return None  # a LEFT JOIN that found nothing
        return self.model.from_db(connection.alias, self.names, values)


class _Statement:
    """The SQL, the converters and the parts of one read, for the connection's engine."""

    def __init__(self, model: type[Model], relations: Sequence[str], match: Sequence[str], also: str) -> None:
        quote = connection.ops.quote_name
        columns: list[str] = []
        cols: list[Any] = []
        self.parts: list[_Part] = []
        joins: list[str] = []
        for n, relation in enumerate([None, *relations]):
            field: ForeignKey[Any, Any] | None = model._meta.get_field(relation) if relation else None  # type: ignore[assignment]
            part_model: type[Model] = field.related_model if field is not None else model  # type: ignore[assignment]
            fields = part_model._meta.concrete_fields
            names = [f.attname for f in fields]
            self.parts.append(_Part(part_model, len(columns), names, fields.index(part_model._meta.pk), field))
            columns += [f"t{n}.{quote(f.column)}" for f in fields]
            cols += [f.get_col(part_model._meta.db_table) for f in fields]
            if field is not None:
                kind = "LEFT JOIN" if field.null else "JOIN"
                target = quote(part_model._meta.db_table)
                joins.append(
                    f" {kind} {target} t{n} ON t{n}.{quote(field.target_field.column)} = t0.{quote(field.column)}"
                )
        self.match: list[Field[Any, Any]] = [model._meta.get_field(name) for name in match]  # type: ignore[misc]
        self.also = [also] if also else []
        # Every name comes from the models' metadata, quoted; the values are parameters.
        self.select = f"SELECT {', '.join(columns)} FROM {quote(model._meta.db_table)} t0{''.join(joins)}"  # noqa: S608
        self.matched = [f"t0.{quote(str(f.column))}" for f in self.match]
        self.sql = f"{self.select} WHERE {' AND '.join([f'{m} = %s' for m in self.matched] + self.also)} LIMIT 1"
        self.compiler = connection.ops.compiler("SQLCompiler")(Query(model), connection, connection.alias)
        self.converters = self.compiler.get_converters(cols)


class JoinedRead(Generic[M]):
    """The one row of `model` matching `match` (and the SQL condition `also`, on `t0`),
    with the rows its `relations` (forward foreign keys; a nullable one is a LEFT JOIN)
    point at, cached on the instance as `select_related` caches them."""

    def __init__(self, model: type[M], *, relations: Sequence[str], match: Sequence[str], also: str = "") -> None:
        self.model, self.relations, self.match, self.also = model, tuple(relations), tuple(match), also
        self._statements: dict[str, _Statement] = {}

    def _statement(self) -> _Statement:
        # One per engine: a process talks to one database, but the test suite switches it.
        found = self._statements.get(connection.vendor)
        if found is None:
            found = self._statements[connection.vendor] = _Statement(self.model, self.relations, self.match, self.also)
        return found

    def first(self, *values: Any) -> M | None:
        return next(self._read(self._statement(), *self.first_statement(*values)), None)

    def first_statement(self, *values: Any) -> Statement:
        """`first`'s statement, to send with others (`run_together`); read its rows with `instances`."""
        statement = self._statement()
        if not statement.match:
            raise TypeError("first() finds a row by the fields a read matches; this read matches none: use where()")
        params = [
            field.get_db_prep_value(value, connection) for field, value in zip(statement.match, values, strict=True)
        ]
        return statement.sql, params

    def each(self, values: Collection[Any]) -> list[M]:
        """Every row whose one `match` field is one of `values`, in no particular order."""
        if not values:
            return []
        sql, params = self.each_statement(values)
        return list(self._read(self._statement(), sql, params))

    def where(self, condition: str, params: Sequence[Any], *, order: str = "") -> list[M]:
        """Every row matching the SQL `condition` on `t0` and the relations' aliases (`t1`, … in
        their order; the read's `also` applies too), sorted by `order` (SQL) if given.

        - `condition` and `order` are SQL written from the models (`table`, `column`), never
          from input: the values go in `params`.
        """
        return list(self._read(self._statement(), *self.where_statement(condition, params, order=order)))

    def where_statement(self, condition: str, params: Sequence[Any], *, order: str = "") -> Statement:
        """`where`'s statement, to send with others (`run_together`); read its rows with `instances`."""
        statement = self._statement()
        sql = f"{statement.select} WHERE {' AND '.join([f'({condition})', *statement.also])}"
        return (f"{sql} ORDER BY {order}" if order else sql), params

    def each_statement(self, values: Collection[Any]) -> Statement:
        """`each`'s statement, to send with others (`run_together`); read its rows with `instances`.

        - `values` must not be empty.
        """
        statement = self._statement()
        if len(statement.match) != 1:
            raise TypeError(f"each() matches one field; this read matches {len(statement.match)}")
        field = statement.match[0]
        params = [field.get_db_prep_value(value, connection) for value in values]
        placeholders = ", ".join(["%s"] * len(params))
        where = " AND ".join([f"{statement.matched[0]} IN ({placeholders})", *statement.also])
        return f"{statement.select} WHERE {where}", params

    def instances(self, rows: list[tuple[Any, ...]]) -> list[M]:
        """The instances of rows this read's statement returned."""
        return list(self._instances(self._statement(), rows))

    def _read(self, statement: _Statement, sql: str, params: Sequence[Any]) -> Iterator[M]:
        return self._instances(statement, run_together([(sql, params)])[0])

    def _instances(self, statement: _Statement, fetched: list[tuple[Any, ...]]) -> Iterator[M]:
        rows: Iterator[Any] = iter(fetched)
        if statement.converters:
            rows = statement.compiler.apply_converters(rows, statement.converters)
        base, *related = statement.parts
        for row in rows:
            instance = base.instance(row)
            for part in related:
                assert part.relation is not None
                part.relation.set_cached_value(instance, part.instance(row))  # type: ignore[arg-type]
            yield instance  # type: ignore[misc]


class ModelColumns(Generic[M]):
    """A model's columns in a statement written by hand, and its rows read back as instances.

    `columns` is the select list of the model's concrete fields (`alias."column", …`, in
    the fields' order): the statement selects it first and may select more after it.
    `rows` turns the statement's rows into (instance, the rest of the row) through the
    ORM's converters and `Model.from_db`, as `RawQuerySet` does, without resolving the
    columns again on every call; the instance is None where a LEFT JOIN found no row.
    """

    def __init__(self, model: type[M], alias: str) -> None:
        self.model, self.alias = model, alias
        self._engines: dict[str, tuple[str, _Part, Any, dict[int, Any]]] = {}

    def _engine(self) -> tuple[str, _Part, Any, dict[int, Any]]:
        found = self._engines.get(connection.vendor)
        if found is None:
            meta, quote = self.model._meta, connection.ops.quote_name
            fields = meta.concrete_fields
            columns = ", ".join(f"{self.alias}.{quote(str(f.column))}" for f in fields)
            part = _Part(self.model, 0, [f.attname for f in fields], fields.index(meta.pk), None)
            compiler = connection.ops.compiler("SQLCompiler")(Query(self.model), connection, connection.alias)
            converters = compiler.get_converters([f.get_col(meta.db_table) for f in fields])
            found = self._engines[connection.vendor] = (columns, part, compiler, converters)
        return found

    @property
    def columns(self) -> str:
        return self._engine()[0]

    def rows(self, rows: Iterable[Sequence[Any]]) -> list[tuple[M | None, tuple[Any, ...]]]:
        _, part, compiler, converters = self._engine()
        if converters:
            rows = compiler.apply_converters(rows, converters)
        width = len(part.names)
        return [(part.instance(row), tuple(row[width:])) for row in rows]  # type: ignore[misc]


class WrittenInsert:
    """One new row of `model`, inserted by a statement written out once per process and engine.

    For the inserts on every call's path; signals are not sent (Gatehouse's models have
    no receivers) and an instance already saved is refused, as an insert must be.

    - `computed`: fields the statement fills itself, by name, each from an SQL expression
      (its parameters passed to `insert`); they are read back with the new id, so an
      engine without `INSERT … RETURNING` cannot have them.
    """

    def __init__(self, model: type[Model], computed: Mapping[str, str] | None = None) -> None:
        self.model = model
        self.computed = dict(computed or {})
        self._statements: dict[str, tuple[str, list[Field[Any, Any]], list[Field[Any, Any]]]] = {}

    def _statement(self) -> tuple[str, list[Field[Any, Any]], list[Field[Any, Any]]]:
        """The SQL, the fields whose values it takes, and the fields it returns."""
        found = self._statements.get(connection.vendor)
        if found is None:
            meta, quote = self.model._meta, connection.ops.quote_name
            computed: list[Field[Any, Any]] = [meta.get_field(name) for name in self.computed]  # type: ignore[misc]
            fields: list[Field[Any, Any]] = [
                f for f in meta.local_concrete_fields if f is not meta.auto_field and f not in computed
            ]
            values = ["%s"] * len(fields) + [f"({expression})" for expression in self.computed.values()]
            sql = (
                f"INSERT INTO {quote(meta.db_table)}"  # noqa: S608
                f" ({', '.join(quote(str(f.column)) for f in [*fields, *computed])}) VALUES ({', '.join(values)})"
            )
            returned: list[Field[Any, Any]] = [*([meta.auto_field] if meta.auto_field else []), *computed]
            if returned and connection.features.can_return_columns_from_insert:
                sql += f" RETURNING {', '.join(quote(str(f.column)) for f in returned)}"
            elif computed:
                raise NotSupportedError(f"{connection.vendor} cannot return what an insert of {meta.label} computes")
            else:
                returned = []
            found = self._statements[connection.vendor] = (sql, fields, returned)
        return found

    def insert(
        self,
        instance: Model,
        *,
        before: Sequence[Statement] = (),
        then: Sequence[Statement] = (),
        computed: Sequence[Any] = (),
    ) -> list[list[tuple[Any, ...]]]:
        """Insert `instance`, with the statements `before` and `then` it sent together
        (`run_together`); the rows of each of `then`.

        - `computed`: the parameters of the computed fields' expressions, in their order.
        """
        sql, fields, returned = self._statement()
        params = self._values(instance, fields)
        auto = self.model._meta.auto_field
        if auto is not None and not returned:  # an engine that cannot return the new id
            run_together(before)
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                new_id = connection.ops.last_insert_id(cursor, self.model._meta.db_table, auto.column)
            setattr(instance, auto.attname, new_id)
            after = run_together(then)
        else:
            results = run_together([*before, (sql, [*params, *computed]), *then])
            row, after = results[len(before)], results[len(before) + 1 :]
            for field, value in zip(returned, row[0] if returned else (), strict=True):
                setattr(instance, field.attname, value)
        self.inserted(instance)
        return after

    def statement(self, instance: Model, *, computed: Sequence[Any] = ()) -> Statement:
        """The insert of `instance` as a statement to send with others (`insert`'s `before`
        and `then`), for a row whose id is known beforehand. What the statement computes
        is not read back; once the statement has run, `inserted` marks the instance saved.
        """
        if self.model._meta.auto_field is not None:
            raise TypeError(f"{self.model._meta.label}'s id comes from the insert: use insert()")
        sql, fields, _ = self._statement()
        return sql, [*self._values(instance, fields), *computed]

    def inserted(self, instance: Model) -> None:
        """Mark `instance` as `save(force_insert=True)` leaves it: stored, no longer adding."""
        instance._state.adding = False
        instance._state.db = connection.alias

    @staticmethod
    def _values(instance: Model, fields: list[Field[Any, Any]]) -> list[Any]:
        """What the ORM would send for each field (`Field.pre_save`, then `get_db_prep_save`).

        - Each field is handed this thread's connection itself, not the `connection` proxy:
          every attribute the fields read of it (its operations, its features) went through
          a context-local lookup, about 35 per call decided at submit.
        """
        if not instance._state.adding:
            raise ValueError(f"{instance!r} is already saved; an insert writes new rows only")
        db = connections[DEFAULT_DB_ALIAS]
        return [field.get_db_prep_save(field.pre_save(instance, True), db) for field in fields]


Statement = tuple[str, Sequence[Any]]


def table(model: type[Model]) -> str:
    """A model's table, quoted for the connection's engine: for a statement written by hand."""
    return connection.ops.quote_name(model._meta.db_table)


def column(model: type[Model], name: str) -> str:
    """One field's column, quoted for the connection's engine: for a statement written by hand."""
    field: Any = model._meta.get_field(name)
    return connection.ops.quote_name(str(field.column))


def run_together(statements: Sequence[Statement]) -> list[list[tuple[Any, ...]]]:
    """Run `statements` in order in this connection's transaction; each one's rows ([] for none).

    - PostgreSQL (`gatehouse.postgresql`'s `run_pipeline`): one round trip, the
      statements queued with libpq and sent in one write, each kept prepared once the
      connection has sent its text a few times (settings: `DB_PREPARED`), so the server
      no longer parses and plans it. Each statement runs on a snapshot of its own, taken
      when it starts, as if sent alone; the first that fails stops the rest and raises.
      Several, with autocommit on, go between a BEGIN and a COMMIT in the same round
      trip: one transaction, all or none (`message_transaction`); in a transaction
      already open, in that one. One statement alone is this too: the reads every call
      makes (the token's agent, a submit's context) are kept prepared so.
    - Before, several statements went as one message of client-bound text, which
      PostgreSQL parsed and planned on every call (an ask's card, three reads, cost 1.0
      ms of its CPU against 0.2 ms prepared), then as psycopg's pipeline, which wrote to
      the socket after every statement (docs/PERFORMANCE.md, twenty-first, twenty-second
      and twenty-fifth passes).
    - Other engines (SQLite, in process: no round trips to save) run them one by one.
    """
    if not statements:
        return []
    pipeline = getattr(connections[DEFAULT_DB_ALIAS], "run_pipeline", None)
    if pipeline is not None:
        _SENDING.message = message = object()
        try:
            return pipeline(statements)
        finally:
            if _SENDING.message is message:
                _SENDING.message = None
    results: list[list[tuple[Any, ...]]] = []
    with connection.cursor() as cursor:
        for sql, params in statements:
            cursor.execute(sql, params)
            results.append(cursor.fetchall() if cursor.description is not None else [])
    return results


class _Sending(threading.local):
    message: object | None = None  # the pipeline `run_together` is sending on this thread (`message_transaction`)


_SENDING = _Sending()


@contextlib.contextmanager
def message_transaction(*, alone: bool = True) -> Iterator[bool]:
    """A transaction whose writes are one `run_together`: all or none, committed when it returns.

    Yields whether the block is that one message (True) or an atomic block (False), so a
    caller can put a check it would otherwise run first into the message itself.

    - PostgreSQL, outside any transaction: nothing is opened here. `run_together` sends
      its statements between a BEGIN and a COMMIT of their own, in one round trip: each
      statement sees the ones before it, the first that fails rolls all of them back, and
      the COMMIT commits the whole (deferred constraints checked then). One round trip
      where BEGIN, the statements and COMMIT took three, and a lock the statements take
      (the audit chain's) is let go as they end, not a round trip later. The block may
      therefore send that one `run_together` only: a statement after it raises
      `TransactionManagementError` before it is sent, as it would not be in the
      transaction. Announce what was written after the block, not in it: outside a
      transaction `transaction.on_commit` runs its callback at once, and a statement the
      callback runs (an ask's card read) would be that second one.
    - Otherwise (SQLite, which runs statements one by one, or a block inside a transaction
      already open), or when the caller has other writes to make with it (`alone=False`):
      `transaction.atomic()`.
    """
    # Inside an atomic block autocommit is off: the block joins that transaction.
    if not (alone and _pipelines() and connection.get_autocommit()):
        with transaction.atomic():
            yield False
        return
    sent: object | None = None  # the message the block sent: a pipeline, or a statement alone

    def only_one(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal sent
        message = _SENDING.message or object()
        if sent is not None and message is not sent:
            raise TransactionManagementError(
                "a message transaction sends one message; this statement would run outside it: "
                f"{sql[:80]!r} (use alone=False)"
            )
        sent = message
        return execute(sql, params, many, context)

    with connection.execute_wrapper(only_one):
        yield True


def _pipelines() -> bool:
    """Whether `run_together` sends several statements as one pipeline (`gatehouse.postgresql`)."""
    return getattr(connections[DEFAULT_DB_ALIAS], "run_pipeline", None) is not None
