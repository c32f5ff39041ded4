"""The conformance suite: AUN's behaviour checklist, item by item, on every runtime kind.

Sender:
    never blocks waiting for a reply ........ test_sender::test_send_returns_before_the_receiver_has_even_handled_it
    handles 0 / 1 / N replies ............... test_sender::test_sender_takes_zero_one_or_many_replies
    never infers failure from silence ....... test_sender::test_silence_is_never_read_as_failure
    collaboration by text/json, not tool_call test_sender::test_collaboration_requests_travel_as_plain_json_not_tool_call
Receiver:
    autonomous: replies only by send tool ... test_receiver::test_thoughts_are_archived_and_never_sent
    tool_call obliges nothing ............... test_receiver::test_receiving_a_tool_call_runs_nothing
    never drops a message ................... test_receiver::test_a_message_nobody_handles_is_archived_not_dropped
    makes no response promise ............... test_receiver::test_no_response_promise_send_message_is_refused_before_anything_is_queued
    declares its mode ....................... test_receiver::test_agents_declare_the_autonomous_mode
    may speak first ......................... test_proactive
Runtime:
    one at a time, FIFO; bound and policy ... test_mailbox
    mention vs broadcast, archive complete .. test_channel
    dedup ................................... test_channel::test_a_second_delivery_of_the_same_message_is_handled_once
    loop guard, both storm shapes ........... test_loop_guard
    failures become dead letters ............ test_dead_letters
    invalid input, specific errors .......... test_invalid_input
"""
