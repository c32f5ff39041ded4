"""Budgets: what bounds the cost of a conversation, enforced by code, never left to a prompt.

The hop guard (`max_hops`) bounds a thread's *depth*: A -> B -> A storms. It cannot bound its
*breadth*: three members of a broadcast group who answer each other grow a thread sideways, each
message a few hops deep, hundreds of them wide. With a model that always answers, that is hundreds of
paid model calls in seconds. [`Budgets`][aun_runtime.Budgets] names the limits that stop it; a [`BudgetLedger`][aun_runtime.BudgetLedger]
(one per runtime) keeps the counts.

* **Thread budget** (`thread_messages`): how many messages one thread (the whole tree started by
  one message) may hold. A send past it is refused.
* **Unaddressed replies** (`unaddressed_replies`): how many messages an agent may send per thread
  in answer to messages that were not addressed to it. A message is *addressed* to an agent when it
  was sent to it directly or names it in its structured mentions (`@all` names everyone, so it
  addresses nobody in particular: it does not count). An agent that was asked may answer as often as
  the thread budget allows; one that overheard speaks at most this often. `tool_call` and
  `tool_result` annotations are not replies and are not counted here (they count in the thread).
* **Model budgets**, per agent: model calls and tokens per thread, and per sliding time window,
  counted from the usage the client reports. Reaching one stops that agent's model calls (the call
  raises [`ModelBudgetExceeded`][aun_runtime.ModelBudgetExceeded] before anything is asked of the model).

Every refusal is a *budget stop*: recorded in the archive (`budget_stop`, with the reason), counted
in `runtime.stats.budget_stops`, logged, and shown in the transcript and the console, like a loop
stop. A handler whose send or model call is refused simply ends: no dead letter, no crash.

Counts are kept per runtime process, for the most recent `Budgets.threads_tracked` threads
(least recently used first out), so memory stays bounded whatever the traffic.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

from protocols.aun import AIDMention, AUNMessage

__all__ = ["DEFAULT_BUDGETS", "BudgetLedger", "Budgets", "ModelCall", "is_addressed"]


@dataclass(frozen=True)
class Budgets:
    """The limits one agent (or every agent of a runtime) works within.

    The defaults let a real collaboration through (a reflection loop of several rounds, a debate of
    a few rounds among a few agents) and stop a group of models that always answer within a few
    model calls per human message. Raise them per runtime (`AUNRuntime(budgets=...)`) or per agent
    (`register_agent(..., budgets=...)`); [`unlimited`][aun_runtime.Budgets.unlimited] turns them all off.

    Attributes:
        thread_messages: messages one thread may hold, its first message included.
        unaddressed_replies: messages an agent may send per thread in answer to messages not
            addressed to it.
        model_calls_per_thread: model calls an agent may make while acting in one thread.
        model_tokens_per_thread: tokens (prompt + completion, as the client reports them) an agent
            may spend in one thread.
        model_calls_per_window: model calls an agent may make in any `window` seconds.
        model_tokens_per_window: tokens an agent may spend in any `window` seconds.
        window: the length of the sliding window, in seconds.
        threads_tracked: how many threads the ledger remembers (least recently used first out).
    """

    thread_messages: int = 64
    unaddressed_replies: int = 1
    model_calls_per_thread: int = 8
    model_tokens_per_thread: int = 100_000
    model_calls_per_window: int = 60
    model_tokens_per_window: int = 500_000
    window: float = 60.0
    #: Not a limit on what agents do but on what the ledger remembers: `unlimited` leaves it.
    threads_tracked: int = field(default=10_000, metadata={"limit": False})

    def __post_init__(self) -> None:
        for name in _counts(type(self)):
            if getattr(self, name) < 0:
                raise ValueError(f"Budgets.{name} must be 0 or more")
        if self.window <= 0:
            raise ValueError("Budgets.window must be a positive number of seconds")

    @classmethod
    def unlimited(cls) -> Budgets:
        """Budgets that never stop anything (the hop guard still bounds depth). For comparisons."""
        big = 2**62
        return cls(**dict.fromkeys(_limits(cls), big))

    @classmethod
    def group_chat(cls, turns: int = 3, members: int = 4) -> Budgets:
        """Budgets for a group chat of several turns: each member may speak `turns` times per thread
        in answer to messages not addressed to it, and may call its model on everything it is shown.

        The default, one unaddressed reply per thread, is for a group where agents speak when they
        are asked: a member that only overheard may add one word, so a group of models that always
        answer ends after one round, at most one message per member per human message. A group that
        is meant to talk among itself (as AutoGen's or CrewAI's group chats do) asks for more turns,
        and pays for them: every message of the thread is shown to every member, so each member may
        call its model up to once per message, about `turns * members + 1` times per thread.

        Args:
            turns: how often each member may speak per thread without being addressed.
            members: how many members speak in the group (sizes the thread and model budgets).

        Example:
            >>> Budgets.group_chat(turns=3, members=4).unaddressed_replies
            3
            >>> Budgets.group_chat(turns=3, members=4).model_calls_per_thread
            13
        """
        if turns < 1 or members < 1:
            raise ValueError("a group chat needs at least one turn and one member")
        default = cls()
        messages = turns * members + 1  # every member's turns, and the message that started the thread
        calls = max(default.model_calls_per_thread, messages)
        return replace(
            default,
            unaddressed_replies=turns,
            thread_messages=max(default.thread_messages, messages),
            model_calls_per_thread=calls,
            # as much per call as the default allows (100,000 tokens over 8 calls)
            model_tokens_per_thread=max(
                default.model_tokens_per_thread,
                calls * default.model_tokens_per_thread // default.model_calls_per_thread,
            ),
        )

    def but(self, **changes: int | float) -> Budgets:
        """A copy with some limits changed: `DEFAULT_BUDGETS.but(model_calls_per_thread=20)`."""
        return replace(self, **changes)  # type: ignore[arg-type]


def _counts(cls: type[Budgets]) -> list[str]:
    """Every whole-number field of `cls`, derived from the class so that none is forgotten."""
    return [f.name for f in fields(cls) if f.type in (int, "int")]


def _limits(cls: type[Budgets]) -> list[str]:
    """The counts of `cls` that limit what agents do (all but the ledger's own memory bound)."""
    return [f.name for f in fields(cls) if f.type in (int, "int") and f.metadata.get("limit", True)]


#: The limits a runtime applies when it is given none.
DEFAULT_BUDGETS = Budgets()


def is_addressed(message: AUNMessage, aid: str) -> bool:
    """Was `message` addressed to `aid`: sent to it directly, or naming it in its mentions?"""
    if message.group_id is None:
        return message.to == aid
    return any(isinstance(m, AIDMention) and m.aid == aid for m in message.mentions)


class _ThreadTally:
    """What one thread has used so far."""

    __slots__ = ("calls", "messages", "tokens", "unaddressed")

    def __init__(self) -> None:
        self.messages = 1  # its first message, which nobody counted: a thread is known from its first reply
        self.unaddressed: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self.tokens: dict[str, int] = {}


class ModelCall:
    """One model call in a window: when it began, and the tokens it used."""

    __slots__ = ("at", "expired", "tokens")

    def __init__(self, at: float) -> None:
        self.at = at
        self.tokens = 0
        self.expired = False


class _Window:
    """One agent's model calls over the last `window` seconds."""

    __slots__ = ("calls", "tokens")

    def __init__(self) -> None:
        # Bounded by the budget itself: a call past model_calls_per_window is refused, not recorded.
        self.calls: deque[ModelCall] = deque()
        self.tokens = 0

    def expire(self, now: float, window: float) -> None:
        calls = self.calls
        while calls and now - calls[0].at >= window:
            call = calls.popleft()
            call.expired = True
            self.tokens -= call.tokens


class BudgetLedger:
    """The counts behind the budgets, for one runtime.

    Args:
        budgets: the limits for every agent without limits of its own.
        clock: seconds, monotonic (tests pass a fake one).
    """

    def __init__(
        self, budgets: Budgets = DEFAULT_BUDGETS, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.budgets = budgets
        self._clock = clock
        self._own: dict[str, Budgets] = {}
        self._threads: OrderedDict[str, _ThreadTally] = OrderedDict()
        self._windows: dict[str, _Window] = {}

    def set_budgets(self, aid: str, budgets: Budgets | None) -> None:
        """Give `aid` limits of its own (None: the runtime's again)."""
        if budgets is None:
            self._own.pop(aid, None)
        else:
            self._own[aid] = budgets

    def budgets_of(self, aid: str) -> Budgets:
        """The limits `aid` works within."""
        return self._own.get(aid, self.budgets)

    def _tally(self, thread: str) -> _ThreadTally:
        threads = self._threads
        tally = threads.get(thread)
        if tally is None:
            tally = threads[thread] = _ThreadTally()
            if len(threads) > self.budgets.threads_tracked:
                threads.popitem(last=False)
        else:
            threads.move_to_end(thread)
        return tally

    # -- sends -------------------------------------------------------------------------------------

    def reply_refusal(self, sender: str, cause: AUNMessage, *, annotation: bool = False) -> str | None:
        """Why a message `sender` sends in answer to `cause` would be refused, or None.

        Counts nothing: an agent asks this before spending a model call on a turn whose answer
        could not go out.
        """
        tally = self._threads.get(cause.thread or cause.message_id)
        return None if tally is None else self._send_refusal(tally, sender, cause, annotation)

    def admit_reply(self, sender: str, cause: AUNMessage, *, annotation: bool = False) -> str | None:
        """Count a message `sender` sends in answer to `cause`; the reason if it is refused."""
        tally = self._tally(cause.thread or cause.message_id)
        refusal = self._send_refusal(tally, sender, cause, annotation)
        if refusal is None:
            tally.messages += 1
            if not annotation and not is_addressed(cause, sender):
                tally.unaddressed[sender] = tally.unaddressed.get(sender, 0) + 1
        return refusal

    def _send_refusal(
        self, tally: _ThreadTally, sender: str, cause: AUNMessage, annotation: bool
    ) -> str | None:
        budgets = self.budgets_of(sender)
        if tally.messages >= budgets.thread_messages:
            return f"the thread holds {tally.messages} messages, its budget (thread_messages={budgets.thread_messages})"
        if not annotation and not is_addressed(cause, sender):
            used = tally.unaddressed.get(sender, 0)
            if used >= budgets.unaddressed_replies:
                return (
                    f"{sender} already sent {used} message(s) in this thread in answer to messages not "
                    f"addressed to it (unaddressed_replies={budgets.unaddressed_replies})"
                )
        return None

    # -- model calls -------------------------------------------------------------------------------

    def model_call_refusal(self, aid: str, thread: str | None) -> str | None:
        """Why `aid` may not call its model now (acting in `thread`, if any), or None."""
        budgets = self.budgets_of(aid)
        if thread is not None:
            tally = self._threads.get(thread)
            if tally is not None:
                calls = tally.calls.get(aid, 0)
                if calls >= budgets.model_calls_per_thread:
                    return f"{aid} made {calls} model calls in this thread (model_calls_per_thread={budgets.model_calls_per_thread})"
                tokens = tally.tokens.get(aid, 0)
                if tokens >= budgets.model_tokens_per_thread:
                    return f"{aid} spent {tokens} tokens in this thread (model_tokens_per_thread={budgets.model_tokens_per_thread})"
        window = self._windows.get(aid)
        if window is not None:
            window.expire(self._clock(), budgets.window)
            if len(window.calls) >= budgets.model_calls_per_window:
                return (
                    f"{aid} made {len(window.calls)} model calls in the last {budgets.window:g} s "
                    f"(model_calls_per_window={budgets.model_calls_per_window})"
                )
            if window.tokens >= budgets.model_tokens_per_window:
                return (
                    f"{aid} spent {window.tokens} tokens in the last {budgets.window:g} s "
                    f"(model_tokens_per_window={budgets.model_tokens_per_window})"
                )
        return None

    def begin_model_call(self, aid: str, thread: str | None) -> ModelCall:
        """Count a model call now (before it is made, so calls in flight count too). Returns the
        call, to pass to [`end_model_call`][aun_runtime.BudgetLedger.end_model_call] with the tokens it used."""
        if thread is not None:
            tally = self._tally(thread)
            tally.calls[aid] = tally.calls.get(aid, 0) + 1
        window = self._windows.get(aid)
        if window is None:
            window = self._windows[aid] = _Window()
        call = ModelCall(self._clock())
        window.calls.append(call)
        return call

    def end_model_call(self, aid: str, thread: str | None, call: ModelCall, tokens: int) -> None:
        """Add the tokens a call used, as its client reported them."""
        if tokens <= 0:
            return
        if thread is not None:
            tally = self._tally(thread)
            tally.tokens[aid] = tally.tokens.get(aid, 0) + tokens
        call.tokens += tokens
        window = self._windows.get(aid)
        if window is not None and not call.expired:
            window.tokens += tokens

    def model_use(self, aid: str, thread: str) -> tuple[int, int]:
        """(calls, tokens) `aid` has spent in `thread` so far (0, 0 if forgotten or none)."""
        tally = self._threads.get(thread)
        if tally is None:
            return 0, 0
        return tally.calls.get(aid, 0), tally.tokens.get(aid, 0)

    def thread_messages(self, thread: str) -> int:
        """Messages counted in `thread` so far (0 if it is not tracked)."""
        tally = self._threads.get(thread)
        return tally.messages if tally is not None else 0
