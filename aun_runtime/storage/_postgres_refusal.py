"""Why a PostgreSQL server could not be used, and what to do about it, in words a person can act on.

`PostgresStorage` opens its session through asyncpg, whose errors say what failed (`password
authentication failed for user "x"`) but not which part of the URL to change. `refusal` turns
each into a [`StorageUnavailableError`][aun_runtime.StorageUnavailableError] that says both;
nothing has been created or changed when it is raised.
"""

from __future__ import annotations

from ..base._errors import DatabaseUnreachableError, StorageUnavailableError

__all__ = ["refusal"]

# By SQLSTATE (https://www.postgresql.org/docs/current/errcodes-appendix.html): what to do.
_ADVICE_BY_STATE = {
    "28P01": "correct the password in the URL",
    "28000": "correct the user in the URL, or create the role on the server (CREATE ROLE ... LOGIN)",
    "3D000": "create the database on the server (CREATE DATABASE ...), or correct its name in the URL: "
    "the runtime creates tables, never databases",
    "42501": "grant the role the rights it needs on that database, or use another role",
    "53300": "the server has no connection to spare: raise its max_connections, or end idle sessions",
    "57P03": "the server is starting or stopping: try again once it accepts connections",
}


def _advice(error: BaseException) -> str:
    state = getattr(error, "sqlstate", None)
    if isinstance(state, str) and state in _ADVICE_BY_STATE:
        return _ADVICE_BY_STATE[state]
    text = str(error)
    if isinstance(error, OverflowError) or "port must be" in text:
        return "give a port from 1 to 65535"
    if "rejected SSL upgrade" in text:
        return "the server does not offer TLS: enable ssl on the server, or drop sslmode=require from the URL"
    if isinstance(error, ConnectionRefusedError):
        return "nothing accepts connections there: start the server, or correct the host and port in the URL"
    if isinstance(error, TimeoutError):
        return "the server did not answer: check that it runs and that the host and port in the URL reach it"
    if isinstance(error, OSError):
        return "check the host and port in the URL, and that the server runs"
    return "correct the URL (postgresql://user[:password]@host[:port]/database)"


# Refusals that may pass by waiting: the server is not up yet, or is starting, or is full.
_PASSING_STATES = frozenset({"57P03", "53300"})


def _may_pass(error: BaseException) -> bool:
    if getattr(error, "sqlstate", None) in _PASSING_STATES:
        return True
    return isinstance(error, OSError) and "rejected SSL upgrade" not in str(error)


def refusal(error: BaseException, location: str) -> StorageUnavailableError:
    """The error to raise when opening `location` (a URL without its password) failed with `error`:
    a `DatabaseUnreachableError` where waiting may help (nothing answers yet), else the setting is wrong."""
    what = str(error).rstrip(".") or type(error).__name__
    kind = DatabaseUnreachableError if _may_pass(error) else StorageUnavailableError
    return kind(
        f"cannot open the PostgreSQL database {location}: {what}: {_advice(error)}", value=location
    )
