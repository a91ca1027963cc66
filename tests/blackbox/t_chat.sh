# keel chat, scripted: standard input is not a terminal, so each line is
# one message and each answer is printed (--json: one JSON object per
# turn). The payer pack's clarification flow, resuming a conversation in
# a second process, bad lines that fail alone, the sample data ingested
# once, the debug trace and the usage.

# `run` sets RC, OUT and ERR in the calling shell, so it never runs in
# a pipeline: input goes through a file. Each test runs in a subshell of
# its own, so exports do not leak into other tests.

# say FORMAT [ARG…]: printf into $TMP/in.txt, the next chat's input.
say() {
    # shellcheck disable=SC2059
    printf "$@" > "$TMP/in.txt"
}

# chat_json DB [ARGS…]: keel chat --pack payer --json on $TMP/in.txt.
chat_json() {
    db=$1
    shift
    export KEEL_NOW=2026-02-07T12:00:00Z
    run "$KEEL" chat --pack payer --db "$db" --json "$@" < "$TMP/in.txt"
}

# line N: the Nth line of stdout (1-based).
line() {
    printf '%s\n' "$OUT" | sed -n "${1}p"
}

# expect_line N FILTER VALUE: jq FILTER over line N of stdout prints VALUE.
expect_line() {
    got=$(line "$1" | jq -c "$2") || fail "line $1 is not JSON: $(line "$1")"
    [ "$got" = "$3" ] || fail "line $1: jq '$2' gave $got, expected $3"
}

lines_out() {
    printf '%s\n' "$OUT" | grep -c .
}

test_chat_text_mode_prints_answers() {
    say 'how do I file an appeal\nSunshine\n'
    run "$KEEL" chat --pack payer --db "$TMP/chat_text.db" < "$TMP/in.txt"
    expect_rc 0
    expect_out "Which health plan is this about?"
    expect_out "Sunshine Health appeal"
    expect_out "Sources:"
    expect_out "[1] How to File an Appeal with Sunshine Health"
    # Not a terminal: no prompt, no progress lines, no JSON.
    if printf '%s' "$OUT" | grep -q -e 'you>' -e 'Searching our materials' -e '"answer"'; then
        fail "prompt, progress or JSON in text mode"
    fi
}

test_chat_json_one_object_per_turn() {
    say 'how do I file an appeal\n\nSunshine\n'
    chat_json "$TMP/chat_json.db"
    expect_rc 0
    [ "$(lines_out)" -eq 2 ] || fail "expected 2 lines (the blank line is skipped)"
    for n in 1 2; do
        expect_line "$n" 'type' '"object"'
        expect_line "$n" '[has("answer"), has("sources"), has("decision"), has("stage"),
                           has("clarification"), has("active_scenario")] | all' 'true'
        expect_line "$n" '(.answer | type), (.sources | type), (.decision | type), (.stage | type)' \
            "$(printf '"string"\n"array"\n"object"\n"string"' | jq -c .)"
        expect_line "$n" '.decision | has("intent") and has("route")' 'true'
        expect_line "$n" '.turn' "$n"
    done
}

test_chat_payer_clarification_flow() {
    say 'how do I file an appeal\nSunshine\n'
    chat_json "$TMP/chat_flow.db"
    expect_rc 0
    expect_line 1 '.clarification | type' '"string"'
    expect_line 1 '.clarification | test("Which health plan")' 'true'
    expect_line 1 '.answer == .clarification' 'true'
    expect_line 1 '[.kind, .stage, .tools_called, .sources]' '["new_question","exploring",[],[]]'
    expect_line 1 '.state.open_slots' '["payer"]'
    expect_line 2 '.clarification' 'null'
    expect_line 2 '.kind' '"slot_fill"'
    expect_line 2 '.state.jurisdiction.payer' '"Sunshine Health"'
    expect_line 2 '.state.open_slots' '[]'
    expect_line 2 '.tools_called' '["rag_search"]'
    expect_line 2 '(.sources | length) > 0' 'true'
    expect_line 2 '.sources[0] | [.n, (.title | test("Sunshine Health"))]' '[1,true]'
    expect_line 2 '.answer | test("\\[1\\]")' 'true'
    c1=$(line 1 | jq -r .conversation_id)
    c2=$(line 2 | jq -r .conversation_id)
    [ "$c1" = "$c2" ] || fail "two conversations: $c1 $c2"
    case "$c1" in conv_*) ;; *) fail "conversation id $c1" ;; esac
}

test_chat_resume_in_second_process() {
    db="$TMP/chat_resume.db"
    say 'how do I file an appeal\n'
    chat_json "$db"
    expect_rc 0
    id=$(line 1 | jq -r .conversation_id)
    expect_line 1 '.turn' '1'

    say 'Sunshine\n'
    chat_json "$db" --conversation "$id"
    expect_rc 0
    expect_line 1 '.conversation_id' "\"$id\""
    expect_line 1 '[.turn, .kind]' '[2,"slot_fill"]'
    expect_line 1 '.state.jurisdiction.payer' '"Sunshine Health"'
    expect_line 1 '.tools_called' '["rag_search"]'

    # A third process: the payer is remembered, a new question needs no
    # clarification.
    say 'how do I file a grievance?\n'
    chat_json "$db" --conversation "$id"
    expect_rc 0
    expect_line 1 '[.turn, .kind, .clarification]' '[3,"new_question",null]'
    expect_line 1 '.state.jurisdiction.payer' '"Sunshine Health"'
    [ "$(sqlite3 "$db" "select turns from conversations where id = '$id'")" = 3 ] ||
        fail "the store does not hold 3 turns"
}

test_chat_unknown_conversation_fails() {
    say 'Sunshine\n'
    chat_json "$TMP/chat_unknown.db" --conversation conv_nosuchthing
    expect_rc 1
    expect_err 'conv_nosuchthing'
    expect_err 'no conversation'
    expect_line 1 '.error.field' '"conversation_id"'
    case "$OUT" in *'"answer"'*) fail "a turn ran" ;; esac
    # A malformed id too.
    say 'Sunshine\n'
    chat_json "$TMP/chat_unknown.db" --conversation 'bad id'
    expect_rc 1
    expect_err 'conversation_id'
}

test_chat_conversation_of_another_pack_fails() {
    db="$TMP/chat_packs.db"
    say 'find papers about sleep\n'
    run "$KEEL" chat --pack scholar --db "$db" --json < "$TMP/in.txt"
    expect_rc 0
    id=$(line 1 | jq -r .conversation_id)
    say 'Sunshine\n'
    chat_json "$db" --conversation "$id"
    expect_rc 1
    expect_err "scholar"
}

test_chat_invalid_utf8_line_fails_alone() {
    say 'caf\351 appeal\nhow do I file an appeal\n'
    chat_json "$TMP/chat_utf8.db"
    expect_rc 1
    [ "$(lines_out)" -eq 2 ] || fail "expected an error line and an answer line"
    expect_line 1 '.error.field' '"message"'
    expect_line 1 '.error.message | test("UTF-8")' 'true'
    expect_line 1 '.error.code | type' '"string"'
    expect_line 2 '[.turn, (.clarification | type)]' '[1,"string"]'
    expect_err "UTF-8"
    # The bad line wrote nothing: only the good turn is stored.
    [ "$(sqlite3 "$TMP/chat_utf8.db" 'select count(*) from turns')" = 1 ] || fail "bad line stored"
}

test_chat_overlong_lines_are_rejected() {
    db="$TMP/chat_long.db"
    # 9000 bytes (over the reader's line), 8193 (one over the message
    # cap), 8192 (exactly the cap), then a normal question.
    awk 'BEGIN {
        s = ""; for (i = 0; i < 1125; i++) s = s "appeals "   # 9000 bytes
        print s
        print substr(s, 1, 8192) "x"
        print substr(s, 1, 8191) "x"
        print "how do I file an appeal"
    }' > "$TMP/in.txt"
    chat_json "$db"
    expect_rc 1
    [ "$(lines_out)" -eq 4 ] || fail "expected 4 output lines, got $(lines_out)"
    expect_line 1 '.error.field' '"message"'
    expect_line 1 '.error.message | test("longer than 8192")' 'true'
    expect_line 2 '.error.field' '"message"'
    expect_line 2 '.error.message | test("longer than 8192")' 'true'
    expect_line 3 '.turn' '1'
    expect_line 4 '.turn' '2'
    [ "$(sqlite3 "$db" "select length(text) from messages where role = 'user' order by turn_seq")" = "$(printf '8192\n23')" ] ||
        fail "stored user messages are not the 8192-byte line and the question"
    # Text mode goes on too.
    run "$KEEL" chat --pack payer --db "$db" < "$TMP/in.txt"
    expect_rc 1
    expect_err "longer than 8192 bytes"
    expect_out "Which health plan"
}

test_chat_role_option() {
    say 'how do I file an appeal\n'
    chat_json "$TMP/chat_role.db" --role provider
    expect_rc 0
    expect_line 1 '.turn' '1'
    say 'how do I file an appeal\n'
    chat_json "$TMP/chat_role.db" --role admin
    expect_rc 1
    expect_line 1 '.error.field' '"role"'
}

test_chat_sample_ingested_once() {
    db="$TMP/chat_sample.db"
    say 'how do I file an appeal\n'
    chat_json "$db"
    expect_rc 0
    expect_err "ingested"
    expect_err "sample records of pack payer"
    n=$(sqlite3 "$db" 'select count(*) from documents')
    [ "$n" -gt 0 ] || fail "no documents after the first run"
    say 'how do I file an appeal\n'
    chat_json "$db"
    expect_rc 0
    if printf '%s' "$ERR" | grep -q "ingested"; then
        fail "ingested again on the second run"
    fi
    [ "$(sqlite3 "$db" 'select count(*) from documents')" = "$n" ] || fail "documents changed"
}

test_chat_debug_trace() {
    say 'how do I file an appeal\nSunshine\n'
    export KEEL_DEBUG_TRACE=1
    chat_json "$TMP/chat_trace.db"
    expect_rc 0
    expect_err "[load start]"
    expect_err "[clarify info]"
    expect_err "[resolve info] calling rag_search"
    expect_err "[publish end]"
    expect_err '"event":"turn.trace"'
    # Without it, no technical events.
    unset KEEL_DEBUG_TRACE
    chat_json "$TMP/chat_trace.db"
    expect_rc 0
    if printf '%s' "$ERR" | grep -q -e '\[load start\]' -e 'turn.trace'; then
        fail "technical events without KEEL_DEBUG_TRACE"
    fi
}

test_chat_default_pack_scholar() {
    say 'find papers about sleep and memory since 2015\n'
    run "$KEEL" chat --db mem: --json < "$TMP/in.txt"
    expect_rc 0
    expect_err "of pack scholar into mem:"
    expect_line 1 '.decision.search.year_from' '2015'
    expect_line 1 '.tools_called' '["search_papers"]'
    expect_line 1 '(.sources | length) > 0' 'true'
    expect_line 1 '[.sources[].year | . >= 2015] | all' 'true'
}

test_chat_help_and_usage_errors() {
    run "$KEEL" chat --help
    expect_rc 0
    expect_out "usage: keel chat"
    expect_out "--conversation ID"
    run "$KEEL" chat --frobnicate
    expect_rc 2
    expect_err "unknown option"
    run "$KEEL" chat --pack
    expect_rc 2
    expect_err "--pack needs a value"
    run "$KEEL" chat hello
    expect_rc 2
    expect_err "unexpected argument"
    say 'hi\n'
    run "$KEEL" chat --pack nosuchpack --db mem: < "$TMP/in.txt"
    expect_rc 1
    expect_err "nosuchpack"
}

# Bugs the first run of these tests found, fixed since.

# The patient-identifier redaction takes a hyphenated year range, or a
# year that ends a sentence, for a date: the policy never sees the years.
test_chat_years_survive_redaction() {
    say 'find papers about sleep from 2018-2020\nfind papers about sleep published since 2019.\nPapers on sleep from 2015 to 2019.\n'
    export KEEL_NOW=2026-02-07T12:00:00Z
    run "$KEEL" chat --db mem: --json < "$TMP/in.txt"
    expect_rc 0
    expect_line 1 '[.decision.search.year_from, .decision.search.year_to]' '[2018,2020]'
    expect_line 2 '[.decision.search.year_from, .decision.search.year_to]' '[2019,null]'
    expect_line 3 '[.decision.search.year_from, .decision.search.year_to]' '[2015,2019]'
    expect_line 3 '.decision.search.query' '"sleep"'
}

# A NUL byte in a line: the line is cut at the NUL (and a long line's
# rest becomes a message of its own) instead of being refused.
test_chat_nul_byte_line_is_refused() {
    say 'how do I\000 file an appeal\n'
    chat_json "$TMP/chat_nul.db"
    expect_rc 1
    expect_line 1 '.error.field' '"message"'
    { printf 'abc\000'; awk 'BEGIN { for (i = 0; i < 9000; i++) printf "x"; print "" }'; } > "$TMP/in.txt"
    chat_json "$TMP/chat_nul.db"
    expect_rc 1
    [ "$(lines_out)" -eq 1 ] || fail "one line became $(lines_out) messages"
    expect_line 1 '.error.field' '"message"'
}
